"""`python -m eval.bench.mcp_start [RUNS]`: seconds from starting `pai mcp` (the service in-process, the embedded
Postgres of an existing home) to its answer to `initialize`, started in the checkout and in another folder
(packaged params, no params.yaml there), alternately, on one home; the median of each. Run it in the checkout."""

from __future__ import annotations

import json
import os
import select
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}},
}


def time_to_initialize(pai: str, cwd: Path, env: dict[str, str]) -> float:
    """Seconds from the start of `pai mcp` in `cwd` to its `initialize` answer; then stdin closes and it exits."""
    t0 = time.monotonic()
    proc = subprocess.Popen([pai, "mcp"], cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        proc.stdin.write((json.dumps(INIT) + "\n").encode())
        proc.stdin.flush()
        ready, _, _ = select.select([proc.stdout], [], [], 300)
        if not ready or "result" not in json.loads(proc.stdout.readline()):
            raise RuntimeError(f"pai mcp in {cwd}: no answer to initialize")
        took = time.monotonic() - t0
        proc.stdin.close()
        proc.wait(timeout=60)
        return took
    finally:
        if proc.poll() is None:
            proc.kill()


def main(runs: int = 3) -> None:
    pai = str(Path(sys.executable).with_name("pai"))
    with tempfile.TemporaryDirectory() as tmp:
        home, elsewhere = Path(tmp) / "home", Path(tmp) / "elsewhere"
        elsewhere.mkdir()
        home.mkdir()
        for cache in ("cache", "models"):  # the converted embedder and the scanner's rules, as a used home has them
            (REPO / ".pai" / cache).mkdir(parents=True, exist_ok=True)
            (home / cache).symlink_to(REPO / ".pai" / cache)
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "PAI_URL")} | {"PAI_HOME": str(home)}
        note = Path(tmp) / "note.md"
        note.write_text("# A note\n\nThe home exists before the first measured start.\n")
        subprocess.run([pai, "ingest", str(note)], cwd=tmp, env=env, check=True, capture_output=True)
        took: dict[str, list[float]] = {"checkout": [], "another folder": []}
        for i in range(runs):
            for where, cwd in (("checkout", REPO), ("another folder", elsewhere))[:: 1 if i % 2 == 0 else -1]:
                took[where].append(time_to_initialize(pai, cwd, env))
                print(f"run {i + 1}, {where}: {took[where][-1]:.2f} s", flush=True)
    for where, values in took.items():
        print(f"{where}: median {statistics.median(values):.2f} s of {runs} ({', '.join(f'{v:.2f}' for v in values)})")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
