"""The user's path, end to end, in a fresh clone with no ../shared: a store of markdown notes, `pai ingest`,
`pai serve`, a replayed consumer's queries and citations, `pai retrain`: the challenger goes on trial (no judged
split speaks for notes), the trial ends with a recorded decision, and a promotion hot-swaps the running service.

It clones the repository, so it tests what is committed (in CI: exactly the submission)."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_pai_retrain_on_a_store_of_notes_puts_the_ranker_on_trial_and_the_trial_decides(db_url, tmp_path):
    clone = tmp_path / "p"  # no tmp_path / "shared": the clone must find everything it needs itself
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    params = (clone / "params.yaml").read_text().replace("lag_seconds: 5.0", "lag_seconds: 0.0")
    params = params.replace("  max_queries: 0 ", "  max_queries: 20 ")  # evaluate: the guards on 20 items each
    params = params.replace("  share: 0.2 ", "  share: 1.0 ").replace("  max_judged: 800 ", "  max_judged: 100 ")
    params = params.replace("  max_cited: 4000 ", "  max_cited: 100 ")  # cited queries both serve alike count too
    # the path, not the quality: guards on 20 items each are noise, so they are opened (measured: pai lab trial)
    params = params.replace("  guard_tolerance: 0.02 ", "  guard_tolerance: 1.0 ")
    params = params.replace("  ood_tolerance: 0.02 ", "  ood_tolerance: 1.0 ").replace(
        "  answer_tolerance: 0.02 ", "  answer_tolerance: 1.0 "
    )
    params = params.replace("  queries: 300 ", "  queries: 60 ")  # code_bench: a smaller out-of-domain set
    (clone / "params.yaml").write_text(params)
    home = tmp_path / ".pai"
    home.mkdir()
    (REPO / ".pai" / "cache").mkdir(parents=True, exist_ok=True)
    (home / "cache").symlink_to(REPO / ".pai" / "cache")
    venv_bin = Path(sys.executable).parent
    path = os.pathsep.join(d for d in os.environ["PATH"].split(os.pathsep) if Path(d) != venv_bin)
    env = os.environ | {"PAI_HOME": str(home), "DATABASE_URL": db_url, "PYTHONPATH": str(clone), "PATH": path}

    said: list[str] = []  # each command's log lines (stderr); stdout is its JSON where asked

    def pai(*args: str, timeout: float = 900) -> str:
        run = subprocess.run(
            [sys.executable, "-m", "cli.main", *args],
            cwd=clone,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert run.returncode == 0, f"pai {' '.join(args)}:\n{run.stdout[-2000:]}\n{run.stderr[-3000:]}"
        said.append(run.stderr)
        return run.stdout

    pai("lab", "notes", "notes", "--corpus-limit", "100")  # the train claims' abstracts + 100 others, as notes
    pai("ingest", "notes")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    serve = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "serve", "--port", str(port)],
        cwd=clone,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(
            lambda: httpx.get(f"{url}/health", timeout=5).status_code == 200 if serve.poll() is None else 1,
            120,
            every=0.5,
            ignore=(httpx.TransportError,),
        )
        assert serve.poll() is None, "pai serve exited"
        replayed = json.loads(pai("lab", "simulate", "--url", url, "--no-ingest", "--max-queries", "300", "--json"))
        assert replayed["queries"] == 300 and replayed["errors"] == 0
        pai("retrain", "--ranker-only")
        assert "is on trial" in said[-1], said[-1][-3000:]
        deploy = json.loads((clone / "metrics" / "deploy.json").read_text())
        trial, challenger = deploy["trial"], deploy["version"]
        assert deploy["challengers"]["ranker"]["decided_by"] == "trial"
        assert httpx.get(f"{url}/selector", timeout=10).json()["version"] == "first-stage"  # not promoted by deploy
        wait_for(
            lambda: httpx.get(f"{url}/selector", timeout=10).json()["trial"] == trial["id"],
            60,
            every=0.5,
            ignore=(httpx.TransportError,),
        )
        # the user's traffic goes on; every query is interleaved (share 1.0 here) until the rule decides
        for _ in range(4):
            pai("lab", "simulate", "--url", url, "--no-ingest", "--max-queries", "100", "--json")
            status = json.loads(pai("status", "--json"))
            if status["trial"] is None:
                break
        closed = status["trials"][0]
        assert closed["id"] == trial["id"] and closed["status"] in ("promoted", "rejected"), closed
        assert closed["evidence"]["judged"] <= 100 and closed["recorded"]  # `pai status` wrote it to MLflow
        served = httpx.get(f"{url}/selector", timeout=10).json()
        if closed["status"] == "promoted":  # hot-swapped, no restart; the registry's champion moved with it
            assert served["version"] == challenger and status["champion"] == challenger
        else:
            assert served["version"] == "first-stage"
        assert served["trial"] is None
    finally:
        serve.terminate()
        serve.wait(timeout=30)
