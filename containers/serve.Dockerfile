# syntax=docker/dockerfile:1
# The service image (CPU): `pai serve` on port 8484, health at /health. compose.yaml also runs the
# MLflow tracking server from it (same mlflow as the clients; psycopg for its Postgres store).
# Build (from the repository root): bash containers/build.sh serve   (podman; or docker, see the script)
#                                   docker compose -f containers/compose.yaml build service
# The base is Debian bookworm: made locally by containers/base.sh where no registry is reachable (the
# default), or BASE_IMAGE=debian:bookworm-slim (compose.yaml) where one is.

# Same torch as .ci/install (the CPU build); llama-cpp-python runs the exported GGUF in-process when
# Ollama is not there, and must equal training.base_model.LLAMA_CPP_SDIST.
ARG BASE_IMAGE=localhost/pai-base:bookworm
ARG TORCH_VERSION=2.13.0
ARG LLAMA_CPP_PYTHON_VERSION=0.3.36

FROM ${BASE_IMAGE} AS build
ARG TORCH_VERSION
ARG LLAMA_CPP_PYTHON_VERSION
# CPU wheels only: the default index would bring several GB of CUDA libraries. Where that index is not
# reachable, TORCH_INDEX=https://pypi.org/simple with WHEELS a folder (mounted into the build) holding
# the torch-*+cpu wheel: pip prefers 2.13.0+cpu over PyPI's 2.13.0.
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
ARG WHEELS=
# pip trusts the system's CA bundle (containers/build.sh mounts the host's over it where a proxy re-signs TLS)
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_CERT=/etc/ssl/certs/ca-certificates.crt VIRTUAL_ENV=/opt/venv PATH=/opt/venv/bin:$PATH
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv build-essential cmake \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv /opt/venv
RUN --mount=type=cache,target=/root/.cache/pip \
    PIP_FIND_LINKS="${WHEELS}" pip install --index-url "${TORCH_INDEX}" "torch==${TORCH_VERSION}"
# Portable build (no -march=native), so the image runs on any x86-64 host.
# hadolint ignore=DL3059
RUN --mount=type=cache,target=/root/.cache/pip \
    CMAKE_ARGS="-DGGML_NATIVE=OFF" pip install "llama-cpp-python==${LLAMA_CPP_PYTHON_VERSION}"
COPY pyproject.toml README.md params.yaml /opt/pai/src/
COPY retrieval /opt/pai/src/retrieval
COPY serving /opt/pai/src/serving
COPY training /opt/pai/src/training
COPY eval /opt/pai/src/eval
COPY cli /opt/pai/src/cli
# Not editable: the package is copied into the venv, /opt/pai/src stays in this stage.
RUN --mount=type=cache,target=/root/.cache/pip \
    PIP_FIND_LINKS="${WHEELS}" pip install "/opt/pai/src" "torch==${TORCH_VERSION}" \
        "llama-cpp-python==${LLAMA_CPP_PYTHON_VERSION}"

FROM ${BASE_IMAGE}
ARG PAI_UID=1000
# libgomp: OpenMP for llama.cpp's CPU backend; git: staging.git commits; passwd: useradd. (Health
# checks use python.) PAI_HOME holds the embedded PostgreSQL's data: mount a volume there.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 libgomp1 git passwd \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log \
    && useradd --create-home --uid "${PAI_UID}" pai \
    && mkdir -p /repo /home/pai/mlartifacts /home/pai/.pai \
    && chown pai /repo /home/pai/mlartifacts /home/pai/.pai
COPY --from=build /opt/venv /opt/venv
# params.yaml so the image runs on its own; compose mounts the whole repository over /repo.
COPY params.yaml /repo/params.yaml
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PAI_HOME=/home/pai/.pai \
    HF_HUB_OFFLINE=1 \
    MLFLOW_DISABLE_TELEMETRY=true
USER ${PAI_UID}
WORKDIR /repo
EXPOSE 8484
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8484/health', timeout=4)"]
ENTRYPOINT ["pai"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8484"]
