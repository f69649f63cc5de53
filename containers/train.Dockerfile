# syntax=docker/dockerfile:1
# The job image: runs one DVC stage, `dvc repro STAGE`, in the repository mounted at /repo.
# Two profiles, one file (build args):
#   cpu (default): FROM the local Debian base (containers/base.sh), CPU torch, the CPU training profile;
#                  bash containers/build.sh train   -> pai-brain/train-cpu:local
#   gpu:           FROM nvidia/cuda, CUDA torch, Unsloth (compose.yaml's `train` service sets these);
#                  docker compose -f containers/compose.yaml --profile train build train
# Run a stage: pai job run STAGE [--no-gpu]   (docker compose, or podman with the host's DATABASE_URL)
# The stage code is the mounted repository's (`python -m training.train` runs with /repo first on
# sys.path); the project installed here supplies the dependencies at the versions below.
ARG BASE_IMAGE=localhost/pai-base:bookworm

FROM ${BASE_IMAGE} AS build
ARG PROFILE=cpu
# Versions that resolve together with Unsloth 2026.10.9, whose own requirements cap torch < 2.15,
# transformers <= 5.17.0, trl <= 1.15.0 and datasets < 5.0 (excluding 4.0.*, 4.1.0, 4.4.*, 4.5.0).
# The CPU install (.ci/install) pins the same torch; its transformers/trl/datasets are newer, which
# pyproject's lower bounds allow. tests/containers checks these against pyproject and Unsloth.
ARG TORCH_VERSION=2.13.0
ARG TORCHVISION_VERSION=0.28.0
# cpu: the CPU wheels. gpu: CUDA 12.8 builds of torch, host driver >= 570 (>= 580 may use .../whl/cu130).
# Where download.pytorch.org is not reachable: TORCH_INDEX=https://pypi.org/simple and WHEELS a folder
# mounted into the build with the torch-*+cpu wheel (containers/build.sh, PAI_WHEELS).
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
ARG WHEELS=
ARG UNSLOTH_VERSION=2026.10.9
ARG TRANSFORMERS_VERSION=5.17.0
ARG TRL_VERSION=1.15.0
ARG DATASETS_VERSION=4.8.5
ARG PEFT_VERSION=0.21.2
ARG ACCELERATE_VERSION=1.15.0
ARG BITSANDBYTES_VERSION=0.50.2
ARG XFORMERS_VERSION=0.0.35
# llama.cpp at one release for GGUF export: the converter (vendor/llama.cpp/convert_hf_to_gguf.py)
# comes from this package's sdist, the quantizer from its binding (llama_cpp.llama_model_quantize).
# Must equal training.base_model.LLAMA_CPP_SDIST.
ARG LLAMA_CPP_PYTHON_VERSION=0.3.36
# pip trusts the system's CA bundle (containers/build.sh mounts the host's over it where a proxy re-signs TLS)
ENV DEBIAN_FRONTEND=noninteractive PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
    VIRTUAL_ENV=/opt/venv PATH=/opt/venv/bin:$PATH

# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends --no-upgrade \
        python3 python3-venv python3-dev build-essential cmake git ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv /opt/venv

# torch first, from its index, so nothing later pulls a different build.
RUN --mount=type=cache,target=/root/.cache/pip \
    if [ "${PROFILE}" = gpu ]; then \
        pip install --index-url "${TORCH_INDEX}" "torch==${TORCH_VERSION}" "torchvision==${TORCHVISION_VERSION}"; \
    else \
        PIP_FIND_LINKS="${WHEELS}" pip install --index-url "${TORCH_INDEX}" "torch==${TORCH_VERSION}"; \
    fi

# The quantizer, built for CPU and portable (no -march=native): quantizing needs no GPU. Its own
# layer, so a change of the project's files does not rebuild it (~5 min).
# hadolint ignore=DL3059
RUN --mount=type=cache,target=/root/.cache/pip \
    CMAKE_ARGS="-DGGML_NATIVE=OFF" pip install "llama-cpp-python==${LLAMA_CPP_PYTHON_VERSION}"

# The project (gpu: with its gpu extra and the Unsloth-compatible pins, resolved together in one step).
COPY pyproject.toml README.md params.yaml /opt/pai/src/
COPY retrieval /opt/pai/src/retrieval
COPY serving /opt/pai/src/serving
COPY training /opt/pai/src/training
COPY eval /opt/pai/src/eval
COPY cli /opt/pai/src/cli
RUN --mount=type=cache,target=/root/.cache/pip \
    if [ "${PROFILE}" = gpu ]; then \
        pip install "/opt/pai/src[gpu]" \
            "torch==${TORCH_VERSION}" \
            "unsloth==${UNSLOTH_VERSION}" \
            "unsloth-zoo==${UNSLOTH_VERSION}" \
            "transformers==${TRANSFORMERS_VERSION}" \
            "trl==${TRL_VERSION}" \
            "datasets==${DATASETS_VERSION}" \
            "peft==${PEFT_VERSION}" \
            "accelerate==${ACCELERATE_VERSION}" \
            "bitsandbytes==${BITSANDBYTES_VERSION}" \
            "xformers==${XFORMERS_VERSION}" \
            "llama-cpp-python==${LLAMA_CPP_PYTHON_VERSION}"; \
    else \
        PIP_FIND_LINKS="${WHEELS}" pip install "/opt/pai/src" \
            "torch==${TORCH_VERSION}" \
            "llama-cpp-python==${LLAMA_CPP_PYTHON_VERSION}"; \
    fi
# Pre-fetch llama.cpp's converter with the project's own function, so export finds it at the same path
# and version without reaching PyPI; here, where cmake is, as reading the sdist's metadata needs it.
# hadolint ignore=DL3059
RUN PAI_HOME=/opt/pai-home PIP_NO_CACHE_DIR=1 python -c "from retrieval.db import pai_home; from training.base_model import llama_cpp_tree; print(llama_cpp_tree(pai_home() / 'cache'))"

FROM ${BASE_IMAGE}
ARG PROFILE=cpu
# The container user's uid: make it yours (PAI_UID=$(id -u)) so files it writes in /repo are yours.
ARG PAI_UID=1000
ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH

# Python with git (DVC); --no-upgrade: the base's ca-certificates stays (an upgrade would rewrite the bundle
# containers/build.sh mounts over it); gpu: headers and a C compiler too, as triton (Unsloth's kernels) compiles a
# small launcher at run time. Non-root: Ubuntu's image ships a user 'ubuntu' with uid 1000; the job
# user takes its place.
# hadolint ignore=DL3008,SC2046
RUN apt-get update \
    && apt-get install -y --no-install-recommends --no-upgrade python3 python3-venv git ca-certificates passwd \
        $([ "${PROFILE}" = gpu ] && echo python3-dev build-essential) \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log \
    && (userdel --remove ubuntu 2>/dev/null || true) \
    && useradd --create-home --uid "${PAI_UID}" --shell /bin/bash pai
COPY --from=build /opt/venv /opt/venv
COPY --from=build --chown=${PAI_UID} /opt/pai-home /home/pai/.pai

# State and caches, each a volume (see compose.yaml): PAI_HOME holds llama.cpp's converter
# ($PAI_HOME/cache/llama.cpp) and the tokenizer cache; HF_HOME the base model; pip's cache serves
# the converter download when the PAI_HOME volume is new.
ENV PAI_HOME=/home/pai/.pai \
    HF_HOME=/home/pai/.cache/huggingface \
    PIP_CACHE_DIR=/home/pai/.cache/pip \
    HF_HUB_OFFLINE=1 \
    MLFLOW_DISABLE_TELEMETRY=true \
    DVC_NO_ANALYTICS=1
USER ${PAI_UID}
# A new named volume on $PAI_HOME starts as a copy of the pre-fetched converter.
RUN mkdir -p "${HF_HOME}" "${PIP_CACHE_DIR}" \
    && git config --global --add safe.directory /repo
VOLUME ["/home/pai/.pai", "/home/pai/.cache/huggingface", "/home/pai/.cache/pip"]

WORKDIR /repo
ENTRYPOINT ["dvc", "repro"]
CMD []
