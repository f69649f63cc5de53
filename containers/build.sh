#!/usr/bin/env bash
# Build the images with podman (or docker where PAI_ENGINE=docker), from the repository root:
#   bash containers/build.sh serve      # pai-brain/serve:local
#   bash containers/build.sh train      # pai-brain/train-cpu:local (CPU torch); PAI_TRAIN_PROFILE=gpu:
#                                       #   pai-brain/train:local FROM nvidia/cuda, Unsloth (a GPU box)
#   bash containers/build.sh            # both
# Environment: PAI_ENGINE (podman if installed, else docker); PAI_UID (the image user's uid, 1000);
# PAI_CA_BUNDLE (below); PAI_WHEELS, a folder with the torch-*+cpu wheel where download.pytorch.org is not
# reachable (default: PIP_FIND_LINKS when it is a folder; it is mounted into the build, PyPI serves the
# rest). Layers are cached: a rebuild after a code change redoes the project's own layer only; pip's
# downloads and built wheels sit in a build cache mount, not in the image.
set -euo pipefail
cd "$(dirname "$0")/.."
engine=${PAI_ENGINE:-$(command -v podman >/dev/null && echo podman || echo docker)}
profile=${PAI_TRAIN_PROFILE:-cpu}
local_base=localhost/pai-base:bookworm
base=${PAI_BASE_IMAGE:-$local_base}
[ "$base" != "$local_base" ] || [ "$engine" != podman ] || bash containers/base.sh
args=(--build-arg "PAI_UID=${PAI_UID:-1000}")
# docker format: OCI images drop HEALTHCHECK
[ "$engine" = podman ] && args+=(--network=host --layers --format docker)
# the host's CA bundle over the image's during the build: pip and apt then trust what the host trusts
# (a TLS-intercepting proxy's CA too); nothing of it stays in the image. PAI_CA_BUNDLE= turns it off.
# (docker build mounts nothing: there the images' own bundle and download.pytorch.org serve)
ca=${PAI_CA_BUNDLE-/etc/ssl/certs/ca-certificates.crt}
[ "$engine" = podman ] && [ -n "$ca" ] && [ -f "$ca" ] && args+=(-v "$(realpath "$ca"):/etc/ssl/certs/ca-certificates.crt:ro")
# PAI_WHEELS defaults to the host's own PIP_FIND_LINKS when that is one folder (where its CPU torch came from)
if [ -z "${PAI_WHEELS+set}" ] && [ -n "${PIP_FIND_LINKS:-}" ] && [ -d "${PIP_FIND_LINKS}" ]; then
  PAI_WHEELS=$PIP_FIND_LINKS
fi
if [ "$engine" = podman ] && [ -n "${PAI_WHEELS:-}" ]; then
  [ -d "$PAI_WHEELS" ] || { echo "build: PAI_WHEELS=$PAI_WHEELS is not a folder" >&2; exit 1; }
  args+=(-v "$(realpath "$PAI_WHEELS"):/wheels:ro" --build-arg WHEELS=/wheels --build-arg TORCH_INDEX=https://pypi.org/simple)
fi

build() {  # image dockerfile [extra args]
  local image=$1 file=$2 t0=$SECONDS
  shift 2
  echo "build: $image ($engine, containers/$file)"
  "$engine" build "${args[@]}" "$@" -f "containers/$file" -t "$image" .
  echo "build: $image in $((SECONDS - t0)) s"
}

for what in "${@:-serve train}"; do
  for w in $what; do
    case $w in
      serve) build pai-brain/serve:local serve.Dockerfile --build-arg "BASE_IMAGE=$base" ;;
      train)
        if [ "$profile" = gpu ]; then   # the GPU box: nvidia/cuda base, CUDA torch, Unsloth
          build pai-brain/train:local train.Dockerfile --build-arg PROFILE=gpu \
            --build-arg BASE_IMAGE=nvidia/cuda:12.8.1-base-ubuntu24.04 \
            --build-arg TORCH_INDEX=https://download.pytorch.org/whl/cu128
        else
          build pai-brain/train-cpu:local train.Dockerfile --build-arg PROFILE=cpu --build-arg "BASE_IMAGE=$base"
        fi ;;
      *) echo "build: unknown image '$w' (serve, train)" >&2; exit 2 ;;
    esac
  done
done
