#!/usr/bin/env bash
# Podman (Debian's package) for building and running the images where there is no Docker engine and no
# image registry: installs podman, debootstrap and their helpers, checks that a container runs, then
# makes the local base image (containers/base.sh). Idempotent: a second run only checks. Needs root.
# What it settles (podman 4.3 on bookworm, in a VM without systemd as PID 1, cgroups v1 with a v2
# hierarchy beside it): runc as the runtime (crun refuses "cgroups in hybrid mode"), cgroups through
# cgroupfs, events to a file, default ulimits under the ones the sandbox lets a runtime set (podman's
# own defaults, nofile 1048576, fail with "setrlimit: Operation not permitted"), overlay storage (vfs
# where the kernel refuses overlay). Builds and jobs use the host's network (--network=host), so pip
# reaches PyPI and a container reaches a host database.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "podman-setup: run as root (apt-get, /etc/containers)" >&2; exit 1; }
need=()
for p in podman runc debootstrap fuse-overlayfs slirp4netns uidmap; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "podman-setup: apt-get install ${need[*]}"
  apt-cache show podman >/dev/null 2>&1 || apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >/dev/null
fi
# Without systemd, podman must not ask it for cgroups or the journal for events.
conf=/etc/containers/containers.conf
if ! grep -q '^# pai-brain' "$conf" 2>/dev/null; then
  [ -s "$conf" ] && cp -n "$conf" "$conf.orig"
  cat >"$conf" <<'CONF'
# pai-brain: containers/podman-setup.sh
[containers]
default_ulimits = ["nofile=16384:16384", "nproc=16384:16384"]

[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
runtime = "runc"
CONF
fi
# overlay where the kernel allows it (fast, shared layers); else vfs (a full copy per layer, slow but works)
if ! podman info --format '{{.Store.GraphDriverName}}' >/dev/null 2>&1; then
  echo "podman-setup: overlay storage failed; switching to vfs"
  printf '[storage]\ndriver = "vfs"\n' >/etc/containers/storage.conf
  podman system reset --force >/dev/null 2>&1 || true
fi
echo "podman-setup: $(podman --version), storage $(podman info --format '{{.Store.GraphDriverName}}'), cgroups $(podman info --format '{{.Host.CgroupManager}}')"
bash containers/base.sh
podman run --rm --network=host localhost/pai-base:bookworm python3 -c 'print("podman-setup: a container runs")'
