# syntax=docker/dockerfile:1
# The service image (CPU): `pai serve` on port 8484, health at /health. compose.yaml also runs the
# MLflow tracking server from it (same mlflow as the clients; psycopg for its Postgres store).
# Build (from the repository root): docker compose -f containers/compose.yaml build service

# Same torch as .ci/install (the CPU build); llama-cpp-python runs the exported GGUF in-process when
# Ollama is not there, and must equal training.base_model.LLAMA_CPP_SDIST.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm
ARG TORCH_VERSION=2.13.0
ARG LLAMA_CPP_PYTHON_VERSION=0.3.36

FROM ${PYTHON_IMAGE} AS build
ARG TORCH_VERSION
ARG LLAMA_CPP_PYTHON_VERSION
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 VIRTUAL_ENV=/opt/venv PATH=/opt/venv/bin:$PATH
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends build-essential cmake \
    && rm -rf /var/lib/apt/lists/* \
    && python -m venv /opt/venv
# CPU wheels only: the default index would bring several GB of CUDA libraries.
RUN --mount=type=cache,target=/root/.cache/pip \
    pip install --index-url https://download.pytorch.org/whl/cpu "torch==${TORCH_VERSION}"
# Portable build (no -march=native), so the image runs on any x86-64 host.
# hadolint ignore=DL3059
RUN --mount=type=cache,target=/root/.cache/pip \
    CMAKE_ARGS="-DGGML_NATIVE=OFF" pip install "llama-cpp-python==${LLAMA_CPP_PYTHON_VERSION}"
COPY pyproject.toml README.md /opt/pai/src/
COPY retrieval /opt/pai/src/retrieval
COPY serving /opt/pai/src/serving
COPY training /opt/pai/src/training
COPY eval /opt/pai/src/eval
COPY cli /opt/pai/src/cli
RUN --mount=type=cache,target=/root/.cache/pip \
    pip install "/opt/pai/src" "torch==${TORCH_VERSION}" "llama-cpp-python==${LLAMA_CPP_PYTHON_VERSION}"

FROM ${PYTHON_IMAGE}
ARG PAI_UID=1000
# libgomp: OpenMP for llama.cpp's CPU backend; git: staging.git commits. (Health checks use python.)
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends libgomp1 git \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid "${PAI_UID}" pai \
    && mkdir -p /repo /home/pai/mlartifacts \
    && chown pai /repo /home/pai/mlartifacts
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
