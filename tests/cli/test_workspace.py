"""One store, one pipeline workspace (cli/workspace.py), on real files in a copy of the checkout's dvc.yaml and
params.yaml: the outputs of the store the checkout holds are parked when another store's run comes, restored when
its own comes back; a corrupt marker, a look-alike parked folder and a second run at once are refused or set aside,
nothing lost."""

import hashlib
import json
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from cli import workspace
from cli.workspace import FOLDER, MARKER, WorkspaceError, held, holder, outputs, switch

REPO = Path(__file__).resolve().parents[2]
A, B = str(uuid.uuid4()), str(uuid.uuid4())


def fill(root: Path, store: str, queries: int) -> dict[str, str]:
    """A store's pipeline outputs as a run leaves them: its pulled log, watermark, a model, metrics; their hashes."""
    files = {
        "data/feedback/feedback.jsonl": "".join(
            json.dumps({"query_id": i, "query": f"{store} q{i}"}) + "\n" for i in range(1, queries + 1)
        ),
        "data/feedback/watermark.json": json.dumps(
            {"updated_at": "2026-01-01T00:00:00", "query_id": queries, "scope": None, "store": store}
        ),
        "models/ranker/adapter.npy": f"weights of {store}",
        "models/ranker/ranker_config.json": json.dumps({"store": store}),
        "models/selector/checkpoints/step-1/state.json": f"checkpoint of {store}",
        "metrics/eval.json": json.dumps({"recall": len(store) + queries}),
        "dvc.lock": f"lock of {store}",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return digest(root, files)


def digest(root: Path, names) -> dict[str, str]:
    return {n: hashlib.sha256((root / n).read_bytes()).hexdigest() for n in names}


@pytest.fixture
def checkout(tmp_path) -> Path:
    root = tmp_path / "checkout"
    root.mkdir()
    for name in ("dvc.yaml", "params.yaml"):
        shutil.copy(REPO / name, root / name)
    return root


def me(store: str) -> dict:
    return {"store": store, "database": f"db_{store[:4]}", "home": f"/homes/{store[:4]}"}


def test_outputs_are_every_out_metric_and_plot_of_dvc_yaml_with_params_filled_in():
    paths = outputs(REPO)
    for p in (
        "data/feedback/feedback.jsonl",
        "data/feedback/watermark.json",
        "data/datasets/train.jsonl",
        "models/ranker/adapter.npy",
        "models/selector/checkpoints",
        "models/export/selector.gguf",
        "data/benchmarks/code-docstrings.jsonl",
        "metrics/eval.json",
        "metrics/deploy.json",
        "metrics/recall_at_k.csv",
        "metrics/loop_recall.csv",
        "metrics/cycle.json",
        "dvc.lock",
    ):
        assert p in paths
    assert not any("${" in p for p in paths) and len(paths) == len(set(paths))


def test_each_stores_outputs_survive_the_others_run_and_come_back_as_they_were(checkout):
    logs = []
    fill(checkout, A, 5)
    switch(checkout, me(A), logs.append)  # a checkout the last session left: its watermark names A
    a = digest(checkout, fill(checkout, A, 5))
    switch(checkout, me(B), logs.append)
    assert not (checkout / "data/feedback/feedback.jsonl").exists()  # B's run reads nothing of A's
    assert not (checkout / "models/selector/checkpoints").exists()  # nor resumes from A's checkpoint
    assert digest(checkout / FOLDER / A, a) == a
    b = fill(checkout, B, 3)
    switch(checkout, me(A), logs.append)
    assert digest(checkout, a) == a and digest(checkout / FOLDER / B, b) == b
    assert len((checkout / "data/feedback/feedback.jsonl").read_text().splitlines()) == 5
    assert json.loads((checkout / FOLDER / MARKER).read_text())["store"] == A
    switch(checkout, me(B), logs.append)
    assert digest(checkout, b) == b and digest(checkout / FOLDER / A, a) == a
    assert f"workspace: parked 7 output(s) of store {A} (marker) in {FOLDER}/{A}" in logs


def test_a_fresh_checkout_is_claimed_and_a_new_store_starts_from_the_committed_files(checkout):
    subprocess.run(["git", "init", "-q"], cwd=checkout, check=True)
    (checkout / "metrics").mkdir()
    (checkout / "metrics/eval.json").write_text('{"committed": true}')
    subprocess.run(["git", "add", "-A"], cwd=checkout, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c"], cwd=checkout, check=True)
    assert holder(checkout) == (None, "no marker; nothing pulled")
    switch(checkout, me(A), print)
    assert not (checkout / FOLDER / A).exists()  # nothing of anyone's to park
    a = fill(checkout, A, 4)
    switch(checkout, me(B), print)
    assert (checkout / "metrics/eval.json").read_text() == '{"committed": true}'  # the repository's, not A's
    assert digest(checkout / FOLDER / A, a) == a


def test_a_corrupt_marker_falls_back_to_the_watermark_and_nobodys_outputs_are_set_aside(checkout):
    a = fill(checkout, A, 2)
    (checkout / FOLDER).mkdir()
    (checkout / FOLDER / MARKER).write_bytes(b'{"store": "\x00../../etc\n' + b"x" * 100_000)
    assert holder(checkout) == (A, "marker unreadable; watermark")
    switch(checkout, me(B), print)
    assert digest(checkout / FOLDER / A, a) == a
    # a marker naming a path and a watermark from before stores had ids: nobody's, parked aside, never read
    fill(checkout, B, 2)
    (checkout / FOLDER / MARKER).write_text(json.dumps({"store": "../" + A}))
    (checkout / "data/feedback/watermark.json").write_text(json.dumps({"updated_at": "x", "query_id": 2}))
    switch(checkout, me(A), print)
    (unclaimed,) = (checkout / FOLDER).glob("unclaimed-*")
    assert (unclaimed / "data/feedback/feedback.jsonl").exists()
    assert digest(checkout, a) == a  # A's own came back, nothing of B's mixed in


@pytest.mark.parametrize("look_alike", [A.upper(), A + " ", A[:-1] + ("0" if A[-1] != "0" else "1")])
def test_a_look_alike_parked_folder_is_never_restored(checkout, look_alike):
    fake = checkout / FOLDER / look_alike / "data/feedback"
    fake.mkdir(parents=True)
    (fake / "feedback.jsonl").write_text('{"query_id": 1, "query": "not A"}\n')
    switch(checkout, me(A), print)
    assert not (checkout / "data/feedback/feedback.jsonl").exists()


def test_a_folder_named_for_the_store_that_holds_another_is_refused_before_anything_moves(checkout):
    b = fill(checkout, B, 3)
    impostor = checkout / FOLDER / A
    (impostor / "data/feedback").mkdir(parents=True)
    (impostor / "store.json").write_text(json.dumps({"store": B}))
    (impostor / "data/feedback/feedback.jsonl").write_text('{"query_id": 1, "query": "B in disguise"}\n')
    with pytest.raises(WorkspaceError, match=f"does not hold store {A}'s outputs") as e:
        switch(checkout, me(A), print)
    assert "\n" not in str(e.value)
    assert digest(checkout, b) == b  # nothing of B's moved
    with pytest.raises(WorkspaceError, match="is not a store id"):
        switch(checkout, me("../" + A), print)


def test_a_second_run_at_once_is_refused_in_one_line_and_nothing_is_lost(checkout):
    a = fill(checkout, A, 2)
    with held(checkout, me(A), print):
        with (
            pytest.raises(WorkspaceError, match=r"another pipeline run holds .*pid \d+, store " + A) as e,
            held(checkout, me(B), print),
        ):
            pass
        assert "\n" not in str(e.value)
        assert digest(checkout, a) == a  # the first run's files untouched
    with held(checkout, me(B), print):  # released: the next run goes
        assert digest(checkout / FOLDER / A, a) == a


def test_status_names_the_store_the_checkout_holds(checkout):
    fill(checkout, A, 1)
    switch(checkout, me(A), print)
    ws = workspace.describe(checkout, B)
    assert ws["store"] == A and not ws["this_store"] and ws["database"] == f"db_{A[:4]}"
    assert workspace.status_line(ws).startswith(f"pipeline outputs in {checkout}: store {A} (database db_{A[:4]}")
    assert "another store's" in workspace.status_line(ws)
    assert workspace.describe(checkout, A)["this_store"]
