"""Selector versions in the registry (eval/registry.py) and the moves of `champion` (eval/promotion.py), the
loop's last step for real: tiny GGUFs exported by the export stage, registered in a real MLflow registry (sqlite),
promoted and rolled back while a real service (llama.cpp in-process, a real Postgres) answers queries, without a
restart; a version that does not load, or whose file changed, never stays promoted."""

import json
import shutil
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from retrieval.contracts.selection import PromptCandidate, render_answer, render_messages
from serving.hotswap import HotSwapper
from serving.picker import Picker
from serving.selectors import FirstStageSelector
from serving.server import BackgroundServer

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """Two exports (q8_0 and q4_k_m) of a tiny Qwen2 + LoRA adapter, as the train stage saves them."""
    from peft import LoraConfig, get_peft_model

    from training.base_model import qwen2_tokenizer, tiny_qwen2
    from training.export import ExportParams, export

    root = tmp_path_factory.mktemp("export")
    tok = qwen2_tokenizer(REPO / ".pai" / "cache")
    model = tiny_qwen2(len(tok), 64, 2, 4, 2, 128, seed=13)
    model_dir = root / "model"
    model.save_pretrained(model_dir / "base")
    get_peft_model(
        model, LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", task_type="CAUSAL_LM")
    ).save_pretrained(model_dir / "adapter")
    tok.save_pretrained(model_dir / "adapter")
    (model_dir / "train_config.json").write_text(
        json.dumps(
            {
                "prompt_version": "pai-select/2",
                "chunk_tokens": 24,
                "k": 5,
                "base_model": "tiny-qwen2",
                "max_length": 1024,
                "profile": "cpu",
                "dataset_sha256": "test",
                "mlflow_run_id": None,
            }
        )
    )
    data = root / "data"
    data.mkdir()
    with open(data / "val.jsonl", "w") as f:
        for i in range(2):
            msgs = render_messages(
                f"question {i}?", [PromptCandidate(f"d/{j}.md", None, f"passage {j}") for j in range(1, 5)], 5, 24
            )
            f.write(json.dumps({"messages": [*msgs, {"role": "assistant", "content": render_answer([2])}]}) + "\n")
    out = {}
    for quant in ("q8_0", "q4_k_m"):
        m = export(
            ExportParams(model=str(model_dir), out=str(root / quant), quant=quant, parity_prompts=2),
            data,
            log=lambda s: None,
        )
        assert m["pick_agreement"] == 1.0 and m["served_parse_rate"] == 1.0
        modelfile = (root / quant / "Modelfile").read_text()
        assert "PARAMETER temperature 0" in modelfile and 'PARAMETER stop "<|im_end|>"' in modelfile
        out[quant] = json.loads((root / quant / "selector.json").read_text())
    return out


@pytest.fixture
def env(db_url, tmp_path, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setenv("PAI_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("OLLAMA_HOST", raising=False)
    return tmp_path


@pytest.fixture
def service(env, db_url, first_stage_service):
    picker = Picker(FirstStageSelector(), timeout_s=30)
    svc = first_stage_service(
        picker,
        staging=env / "st",
        inline=True,
        swapper=HotSwapper(picker, db_url, grace_s=1),
    )
    with BackgroundServer(svc) as server, httpx.Client(base_url=server.url, timeout=60) as client:
        for name in ("bees", "rivers", "compilers", "postgres"):
            client.post(
                "/ingest", json={"source": name, "text": f"# {name}\n\nA note about {name} and how they work."}
            ).raise_for_status()
        yield client


def served_by(client) -> str:
    r = client.post("/query", json={"query": "how do bees work?"}).json()
    assert r["selector_version"] == r["active_selector"]
    return r["selector_version"]


def test_promote_swaps_the_running_service_and_rollback_goes_back(exports, service, env):
    from cli.main import app
    from eval import promotion, registry

    v1 = registry.register(exports["q8_0"], {"hotpotqa/test/recall_at_5": 0.5})
    v2 = registry.register(exports["q4_k_m"], {})
    assert (v1["version"], v2["version"]) == ("pai-selector:1", "pai-selector:2")
    assert served_by(service) == "first-stage"

    cli = CliRunner()
    r = cli.invoke(app, ["promote", "1", "--wait", "60"])
    assert r.exit_code == 0, r.output
    assert served_by(service) == "pai-selector:1"
    moved = promotion.promote("2", wait_s=60)
    assert moved.services == 1 and len(moved.swap_ms) == 1 and moved.swap_ms[0] > 0
    assert served_by(service) == "pai-selector:2" and registry.champion()["version"] == "pai-selector:2"

    promotion.rollback(wait_s=60)
    assert served_by(service) == "pai-selector:1" and registry.history() == ["1"]
    promotion.rollback(wait_s=60)
    assert served_by(service) == "first-stage" and registry.champion() is None

    status = json.loads(cli.invoke(app, ["status", "--json"]).stdout)
    assert [d["action"] for d in status["deployments"]] == ["rollback", "rollback", "promote", "promote"]
    assert all(a["ok"] for d in status["deployments"] for a in d["applies"])


def test_a_version_whose_gguf_does_not_load_is_rejected_and_nothing_stays_promoted(exports, service, env):
    from eval import promotion, registry
    from retrieval.files import files_sha256

    good = registry.register(exports["q8_0"], {})
    promotion.promote(good["registry_version"], wait_s=60)
    broken_file = env / "broken.gguf"
    broken_file.write_bytes(b"GGUF" + b"\0" * 1000)
    broken = registry.register(
        {**exports["q4_k_m"], "gguf": str(broken_file), "gguf_sha256": files_sha256(broken_file)}, {}
    )
    with pytest.raises(
        registry.RegistryError, match="rejected by service .*does not load.*champion stays pai-selector:1"
    ):
        promotion.promote(broken["registry_version"], wait_s=60)
    assert registry.champion()["version"] == "pai-selector:1"
    assert served_by(service) == "pai-selector:1"
    with pytest.raises(registry.RegistryError, match="no selector version '7'"):
        promotion.promote("7")
    shutil.copyfile(exports["q8_0"]["gguf"], broken_file)  # the file changed after registration
    with pytest.raises(registry.RegistryError, match="does not match its registered sha256"):
        promotion.promote(broken["registry_version"])


def test_a_trial_is_recorded_on_the_challengers_version_and_a_win_moves_the_champion(exports, env, db_url):
    from eval import promotion, registry
    from retrieval.contracts.interleaving import TrialParams
    from retrieval.db import connect
    from retrieval.logs import trials

    v1 = registry.register(exports["q8_0"], {})
    trial = promotion.start_trial(v1, TrialParams())
    assert registry.record_of("challenger")["version"] == v1["version"] and registry.champion() is None
    tags = registry.client().get_model_version(registry.MODEL, "1").tags
    assert tags["trial_status"] == "running" and tags["trial_champion"] == "first-stage"
    assert promotion.record_trials() == []  # a running trial is not recorded yet
    with connect(db_url) as conn:  # the rule decided (as a service's settle does): closed, won
        conn.execute(
            "UPDATE selector_trials SET status = 'promoted', reason = 'won', evidence = %s WHERE id = %s",
            ('{"wins": 31, "losses": 9, "judged": 52}', trial.id),
        )
    (line,) = promotion.record_trials()
    assert line.startswith(f"trial {trial.id}: pai-selector:1 vs first-stage: promoted")
    tags = registry.client().get_model_version(registry.MODEL, "1").tags
    assert (tags["trial_status"], tags["trial_wins"], tags["trial_losses"]) == ("promoted", "31", "9")
    assert registry.champion()["version"] == "pai-selector:1" and registry.history() == ["1"]
    assert promotion.record_trials() == []  # once
    # a new trial, then a manual promotion: the trial's evidence is moot, it stops
    v2 = registry.register(exports["q4_k_m"], {})
    promotion.start_trial(v2, TrialParams())
    promotion.promote("1", wait_s=0)
    with connect(db_url) as conn:
        assert trials.running(conn) is None and trials.recent(conn, 1)[0].status == "stopped"


def test_deploy_on_a_store_without_its_judged_split_starts_one_trial_and_a_retrain_waits_for_it(env, tmp_path):
    """The user's store: scifact-test has no result, so a ranker passing the guards goes on trial; the next retrain's
    ranker is registered but waits; the same model as the champion is not tried again."""
    from eval import promotion, registry
    from eval.deploy import deploy
    from eval.gate import DeployParams
    from eval.systems import BASELINES
    from retrieval.contracts.interleaving import TrialParams

    def ranker(name: str, weight: str) -> Path:
        folder = tmp_path / name
        folder.mkdir()
        (folder / "ranker_config.json").write_text(json.dumps({"weights": weight}))
        return folder

    row = {"recall@5": 0.8, "answer_in_context": None, "json_valid": 1.0}
    result = {
        "hotpotqa/test": {
            "systems": {**{b: row for b in BASELINES}, "ranker": row},
            "paired_bootstrap": {"ranker_vs_cosine": {"recall@5_diff": 0.0, "ci95_low": -0.01, "ci95_high": 0.01}},
        }
    }
    (tmp_path / "eval.json").write_text(json.dumps(result))
    p = DeployParams(
        ranker=str(ranker("r1", "a")), metrics=str(tmp_path), in_domain_guard="", out_of_domain="hotpotqa/test"
    )
    out = deploy(p, trial=TrialParams())
    assert out["challengers"]["ranker"]["decided_by"] == "trial" and out["trial"]["challenger"] == "pai-selector:1"
    assert promotion.running_trial().id == out["trial"]["id"] and registry.champion() is None
    again = deploy(replace(p, ranker=str(ranker("r2", "b"))), trial=TrialParams())
    assert again["version"] == "pai-selector:2" and again["waiting_for"]["id"] == out["trial"]["id"]
    assert promotion.running_trial().challenger == "pai-selector:1"  # its evidence is kept
    # a challenger failing the gate meanwhile (the LLM's chain after the ranker's) leaves `challenger` to the trial's
    failing = tmp_path / "failing"
    failing.mkdir()
    low = {"recall@5": 0.5, "answer_in_context": None, "json_valid": 1.0}
    vs = {"ranker_vs_cosine": {"recall@5_diff": -0.3, "ci95_low": -0.35, "ci95_high": -0.25}}
    bad = {"hotpotqa/test": {"systems": {**{b: row for b in BASELINES}, "ranker": low}, "paired_bootstrap": vs}}
    (failing / "eval.json").write_text(json.dumps(bad))
    lost = deploy(replace(p, ranker=str(ranker("r3", "c")), metrics=str(failing)), trial=TrialParams())
    assert not lost["passed_gate"] and lost["alias"] is None and lost["trial_running"]["id"] == out["trial"]["id"]
    assert str(promotion.client().get_model_version_by_alias(promotion.MODEL, "challenger").version) == "1"
    promotion.promote("1", wait_s=0)  # by hand: the running trial stops
    same = deploy(replace(p, ranker=str(tmp_path / "r1")), trial=TrialParams())
    assert same["alias"] == "champion" and same["trial"] is None and promotion.running_trial() is None
