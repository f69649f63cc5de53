#!/usr/bin/env bash
# The ranker's chain (`train_ranker`, then `evaluate`) of two commits on the same inputs, in git worktrees of this
# checkout with this checkout's .venv: one feedback log and one set of benchmark files (e.g. a main job's
# `data/feedback` and `data/benchmarks`), so what differs in metrics/eval.json is the code, not the run. The main
# job's own log differs from run to run (the service's exploration draws are not seeded), so two main jobs
# (main_job_worktrees.sh) cannot show that a change leaves the figures as they were; this can.
# Usage: eval/bench/stages_worktrees.sh OLD_REV NEW_REV FEEDBACK_DIR BENCHMARKS_DIR [WORKDIR]
# Reads: WORKDIR/times, WORKDIR/eval-{old,new}.json, WORKDIR/ranker-{old,new}.json (models/ranker/metrics.json).
set -uo pipefail
OLD=${1:?old rev} NEW=${2:?new rev} FEEDBACK=${3:?feedback dir} BENCHMARKS=${4:?benchmarks dir}
B=${5:-/tmp/stages-worktrees}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
HOME_NOW=${PAI_HOME:-$REPO/.pai}
. "$REPO/eval/bench/worktrees.sh"
worktree_pair "$OLD" "$NEW" "$B"
for v in old new; do
  rm -rf "$B/$v/data/feedback" "$B/$v/data/benchmarks"
  cp -r "$FEEDBACK" "$B/$v/data/feedback" && cp -r "$BENCHMARKS" "$B/$v/data/benchmarks"
done
[ -f "$HOME_NOW/embeddings.sqlite" ] && cp "$HOME_NOW/embeddings.sqlite" "$B/home-old/"
for v in old new; do
  # the new one reads the old one's vector cache, as it was left: both rank the same vectors, however a batch was padded
  [ $v = new ] && "$REPO/.venv/bin/python" -c "import sqlite3, sys; sqlite3.connect(sys.argv[1]).backup(sqlite3.connect(sys.argv[2]))" \
    "$B/home-old/embeddings.sqlite" "$B/home-new/embeddings.sqlite"
  s=$(date +%s)
  (cd "$B/$v" && export PAI_HOME="$B/home-$v" PYTHONPATH="$B/$v" HF_HUB_OFFLINE=1 MLFLOW_DISABLE_TELEMETRY=true \
    PATH="$REPO/.venv/bin:$PATH" && python -m training.train_ranker && python -m eval.evaluate) > "$B/$v.log" 2>&1
  echo "$v rc=$? $(( $(date +%s) - s )) s" >> "$B/times"
  cp "$B/$v/metrics/eval.json" "$B/eval-$v.json"; cp "$B/$v/models/ranker/metrics.json" "$B/ranker-$v.json"
done
for v in old new; do git -C "$REPO" worktree remove --force "$B/$v"; done
cat "$B/times"
