#!/usr/bin/env bash
# The main job of two commits side by side on this machine (issue 26): a fresh clone of each, installed
# (`bash .ci/install`), then `pai cycle` with an empty PAI_HOME, one after the other; then `pai lab bench policy`
# in each workspace. Usage: eval/bench/main_job_side_by_side.sh OLD_REV NEW_REV [WORKDIR]
# Times land in WORKDIR/times; logs in WORKDIR/cycle-{old,new}.log. Keep the machine otherwise idle.
set -uo pipefail
OLD=${1:?old rev} NEW=${2:?new rev} B=${3:-/tmp/main-job-side-by-side}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$B" && mkdir -p "$B" && ln -s "$(cd "$REPO/../shared" && pwd)" "$B/shared"
git clone -q "$REPO" "$B/old" && git -C "$B/old" checkout -q "$OLD"
git clone -q "$REPO" "$B/new" && git -C "$B/new" checkout -q "$NEW"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores" > "$B/times"
for v in old new; do
  s=$(date +%s); (cd "$B/$v" && bash .ci/install > "$B/install-$v.log" 2>&1)
  echo "install $v rc=$? $(( $(date +%s) - s )) s" >> "$B/times"
done
for v in old new; do
  s=$(date +%s); (cd "$B/$v" && PAI_HOME="$B/home-$v" .venv/bin/pai cycle > "$B/cycle-$v.log" 2>&1)
  echo "cycle $v rc=$? $(( $(date +%s) - s )) s" >> "$B/times"
done
for v in old new; do
  (cd "$B/$v" && PAI_HOME="$B/home-$v" .venv/bin/pai lab bench policy --queries 200 --out "$B/policy-$v.json" > "$B/policy-$v.log" 2>&1)
done
cat "$B/times"
