#!/usr/bin/env bash
# The main job (`pai lab cycle`) of two commits one after the other, in git worktrees of this checkout with this
# checkout's .venv (no second install: the commits must share their dependencies), each with a home of its own
# and a copy of this home's embedding cache. Usage: eval/bench/main_job_worktrees.sh OLD_REV NEW_REV [WORKDIR]
# Reads: WORKDIR/times, WORKDIR/cycle-{old,new}.json, WORKDIR/eval-{old,new}.json (metrics/eval.json); keeps each
# side's home (its store) and ranker (WORKDIR/home-{old,new}, WORKDIR/ranker-{old,new}).
set -uo pipefail
OLD=${1:?old rev} NEW=${2:?new rev} B=${3:-/tmp/main-job-worktrees}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
HOME_NOW=${PAI_HOME:-$REPO/.pai}
. "$REPO/eval/bench/worktrees.sh"
worktree_pair "$OLD" "$NEW" "$B"
for v in old new; do [ -f "$HOME_NOW/embeddings.sqlite" ] && cp "$HOME_NOW/embeddings.sqlite" "$B/home-$v/"; done
for v in old new; do
  s=$(date +%s)
  (cd "$B/$v" && PAI_HOME="$B/home-$v" PYTHONPATH="$B/$v" HF_HUB_OFFLINE=1 MLFLOW_DISABLE_TELEMETRY=true \
    "$REPO/.venv/bin/python" -m cli.main lab cycle --json > "$B/cycle-$v.json" 2> "$B/cycle-$v.log")
  echo "cycle $v rc=$? $(( $(date +%s) - s )) s" >> "$B/times"
  cp "$B/$v/metrics/eval.json" "$B/eval-$v.json"
  cp -r "$B/$v/models/ranker" "$B/ranker-$v" 2>/dev/null  # the side's ranker, for an end-to-end look afterwards
done
for v in old new; do git -C "$REPO" worktree remove --force "$B/$v"; done
cat "$B/times"
