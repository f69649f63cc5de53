#!/usr/bin/env bash
# `bash eval/bench/user_path.sh [REPO]` (default: this checkout, its .venv): the user's path at full scale in a fresh clone with no ../shared: SciFact's corpus as markdown notes, ingest,
# serve, 500 train claims replayed (realistic consumer, PASSES times), pai retrain --ranker-only -> trial, then the other 309
# train claims (never learned from) replayed in passes with new consumer seeds until the trial decides.
set -euo pipefail
d=$(mktemp -d /tmp/userpath.XXXX); echo "workdir $d"
REPO=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
git clone -q "$REPO" "$d/p"; cd "$d/p"
export PAI_HOME="$d/home" PYTHONPATH="$d/p" HF_HUB_OFFLINE=1 MLFLOW_DISABLE_TELEMETRY=true
unset DATABASE_URL
mkdir -p "$PAI_HOME"; ln -s "$REPO/.pai/cache" "$PAI_HOME/cache" 2>/dev/null || true
PY="$REPO/.venv/bin/python"
export PATH="$REPO/.venv/bin:$PATH"
sed -i 's/lag_seconds: 5.0/lag_seconds: 0.0/' params.yaml
t0=$(date +%s)
$PY -m cli.main lab notes notes
$PY -m cli.main ingest notes | tail -3
t1=$(date +%s); echo "ingest: $((t1-t0)) s"
$PY -m cli.main serve --port 8599 > "$d/serve.log" 2>&1 &
SERVE=$!
trap 'kill $SERVE 2>/dev/null' EXIT
until curl -sf localhost:8599/health >/dev/null; do sleep 1; done
# before the first retrain the 500 claims are asked PASSES times (default 3, as `pai lab cycle`'s day one), fresh
# consumer draws each time: a memory in use is asked the same things again
for pass in $(seq 1 "${PASSES:-3}"); do
  sed -i -E "s/^  seed: [0-9]+( +# the realistic consumer's draws)/  seed: $((100 + pass))\1/" params.yaml
  $PY -m cli.main lab simulate --url http://127.0.0.1:8599 --no-ingest --max-queries 500 --json > "$d/replay-$pass.json"
done
t2=$(date +%s); echo "replay: $((t2-t1)) s"; head -30 "$d/replay-1.json"
$PY -m cli.main retrain --ranker-only 2>&1 | tail -40
t3=$(date +%s); echo "retrain: $((t3-t2)) s"
cp metrics/deploy.json metrics/eval.json "$d/"
for seed in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
  sed -i -E "s/^  seed: [0-9]+( +# the realistic consumer's draws)/  seed: $seed\1/" params.yaml
  $PY -m cli.main lab simulate --url http://127.0.0.1:8599 --no-ingest --offset 500 --json > "$d/trial-pass-$seed.json"
  $PY -m cli.main status --json > "$d/status.json"
  python3 -c "import json,sys; s=json.load(open('$d/status.json')); t=s['trial']; print('pass $seed:', (t or {}).get('evidence', {}).get('reason') if t else 'no trial running', '| latest:', s['trials'][0]['status'] if s['trials'] else None)"
  python3 -c "import json,sys; s=json.load(open('$d/status.json')); sys.exit(0 if s['trial'] else 1)" || break
done
t4=$(date +%s); echo "trial traffic: $((t4-t3)) s"
curl -s localhost:8599/selector | python3 -c "import json,sys; s=json.load(sys.stdin); print('serving', s['version'], 'trial', s['trial'])"
python3 -c "import json; s=json.load(open('$d/status.json')); print(json.dumps(s['trials'][0], indent=1)); print('champion', s['champion'])"
echo "total: $(( $(date +%s) - t0 )) s on $(lscpu | grep 'Model name' | sed 's/Model name: *//')"
kill $SERVE; wait $SERVE 2>/dev/null || true
$PY -m eval.bench.notes_decision "$PAI_HOME"   # the judged split scores the decision afterwards
