#!/usr/bin/env bash
# The images' base, made here from Debian's packages (no image registry needed): a minimal bookworm
# root filesystem (debootstrap --variant=minbase) with Python 3.11, imported into podman as
# localhost/pai-base:bookworm. Cached: nothing to do once the image exists (--force rebuilds it).
# Needs root, debootstrap and podman (bash containers/podman-setup.sh installs both). ~3 min cold.
#   bash containers/base.sh            # uses the mirror of /etc/apt/sources.list*, else deb.debian.org
#   PAI_BASE_MIRROR=http://... bash containers/base.sh
set -euo pipefail
IMAGE=${PAI_BASE_IMAGE:-localhost/pai-base:bookworm}
SUITE=bookworm
if [ "${1:-}" != --force ] && podman image exists "$IMAGE"; then
  echo "base: $IMAGE exists (--force rebuilds it)"
  exit 0
fi
[ "$(id -u)" = 0 ] || { echo "base: debootstrap needs root" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "base: debootstrap not found: bash containers/podman-setup.sh" >&2; exit 1; }

# The host's Debian mirror (deb822 'URIs:' or one-line 'deb URL'), the first that is not the security archive
mirror=${PAI_BASE_MIRROR:-$(grep -hoE '^(URIs:[[:space:]]*|deb[[:space:]]+(\[[^]]*\][[:space:]]+)?)[a-z]+://[^[:space:]]+' \
  /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null \
  | grep -oE '[a-z]+://[^[:space:]]+' | grep -v -- '-security' | head -1 || true)}
mirror=${mirror:-http://deb.debian.org/debian}
root=$(mktemp -d /var/tmp/pai-base.XXXXXX)
trap 'rm -rf "$root"' EXIT
echo "base: debootstrap $SUITE from $mirror"
debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates "$SUITE" "$root" "$mirror" >"$root.log" 2>&1 \
  || { tail -20 "$root.log" >&2; rm -f "$root.log"; exit 1; }
rm -f "$root.log"
# security updates in the image's own apt sources; no apt lists, caches or docs in the image
security=${mirror%/debian}/debian-security
echo "deb $mirror $SUITE main
deb $mirror $SUITE-updates main
deb $security $SUITE-security main" >"$root/etc/apt/sources.list"
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
  "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/locale/*
tar -C "$root" -c . | podman import --change 'CMD ["/bin/bash"]' --change 'ENV LANG=C.UTF-8' - "$IMAGE" >/dev/null
echo "base: $IMAGE $(podman image inspect --format '{{.Size}}' "$IMAGE" | numfmt --to=iec) imported"
