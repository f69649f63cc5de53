#!/usr/bin/env bash
# The previews' sweep (docs/measurements.md, "Previews: labels below the cut"): `pai lab loop report --consumer
# realistic` (on-policy cycles through the real service) for a consumer that never expands a preview and ones that
# expand a relevant preview with p 0.3, 0.5 and 0.8 (an irrelevant one with 0.05), each over the seeds given.
# Run in a checkout whose home holds the demo's SciFact store (`pai lab cycle` first; PAI_HOME, else the checkout's
# .pai). Writes OUT/<config>-s<seed>/.
# usage: eval/bench/previews_sweep.sh OUT [SEEDS...]   (default seeds: 0 1 2; CYCLES=3; CONFIGS, default
# "none p0.3 p0.5 p0.8": a config `pX` expands a relevant preview with p X; `pX-noexplore` also turns search.explore_rate
# off, the context's last slot never explored; `-linesN` lists N preview lines instead of search.previews; `-norecall`
# trains rankers without `recalled`, what similar past questions cited: train_ranker.recall_threshold 1)
set -euo pipefail
out=${1:?usage: previews_sweep.sh OUT [SEEDS...]}
shift
seeds=${*:-0 1 2}
py=${PYTHON:-.venv/bin/python}
export PAI_HOME=${PAI_HOME:-$PWD/.pai} # the demo's home, where `pai lab cycle` put SciFact
mkdir -p "$out"
for config in ${CONFIGS:-none p0.3 p0.5 p0.8}; do
  for seed in $seeds; do
    dir="$out/$config-s$seed"
    [ -f "$dir/loop_onpolicy_realistic.json" ] && continue # a rerun keeps what finished
    mkdir -p "$dir"
    "$py" - "$config" "$seed" "$dir/params.yaml" <<'EOF'
import sys, yaml
config, seed, dest = sys.argv[1], int(sys.argv[2]), sys.argv[3]
raw = yaml.safe_load(open("params.yaml"))
raw["replay"]["seed"] = seed
if config == "none":
    raw["search"]["previews"] = 0
else:
    raw["replay"]["expand_relevant"] = float(config[1:].split("-")[0])
    raw["replay"]["expand_irrelevant"] = 0.05
for flag in config.split("-")[1:]:
    if flag == "noexplore":
        raw["search"]["explore_rate"] = 0.0
    elif flag == "norecall":
        raw["train_ranker"]["recall_threshold"] = 1.0
    elif flag.startswith("lines"):
        raw["search"]["previews"] = int(flag.removeprefix("lines"))
    else:
        sys.exit(f"previews_sweep.sh: unknown config flag -{flag} in {config}")
yaml.safe_dump(raw, open(dest, "w"), sort_keys=False)
EOF
    echo "== $config seed $seed: $(date -u +%H:%M:%S)"
    "$py" -m cli.main lab loop report --consumer realistic --slices "${CYCLES:-3}" --params "$dir/params.yaml" \
      --out-dir "$dir" --json >"$dir/stdout.json" 2>"$dir/stderr.log"
  done
done
"$py" - "$out" <<'EOF'
import json, sys
from pathlib import Path
print("config seed | cycle: vs general [CI] | last: hotpotqa, code | expanded (relevant) | +tokens")
for f in sorted(Path(sys.argv[1]).glob("*/loop_onpolicy_realistic.json")):
    r = json.loads(f.read_text())
    cyc = " / ".join(f"{x['vs_general']['diff']:+.3f}" for x in r["rows"])
    last = r["rows"][-1]["vs_general"]
    guards = ", ".join(f"{k} {g['vs_general']['diff']:+.3f}" for k, g in r.get("guards", {}).items())
    exp = sum(x["previews"]["expanded"] for x in r["rows"]), sum(x["previews"]["expanded_relevant"] for x in r["rows"])
    print(f"{f.parent.name} | {cyc} [{last['ci95_low']:+.3f}, {last['ci95_high']:+.3f}] | {guards} | {exp[0]} ({exp[1]}) | {r['preview_token_share']:+.1%}")
EOF
