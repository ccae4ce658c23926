#!/usr/bin/env bash
# Builds the sandbox image TAG (argument 1). Picks its base by itself:
#   1. $REWARDBOX_BASE_IMAGE if set;
#   2. python:3.11-slim-bookworm if present or pullable (a registry is reachable);
#   3. otherwise a Debian root filesystem made with debootstrap from Debian's
#      mirrors and imported as rewardbox/debian-base:bookworm (built once, cached).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tag=${1:?usage: build.sh TAG}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

log() { echo "[sandbox-image] $*" >&2; }
# shellcheck source=../base.sh
. "$here/../base.sh"

no_base() {
  log "no registry reachable: bootstrapping Debian bookworm from $mirror (once, a few minutes)"
  bootstrap_base >&2
  echo "$local_base"
}

bootstrap_base() {
  command -v debootstrap >/dev/null || {
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      log "installing debootstrap"; apt-get install -y -qq debootstrap >/dev/null
    else
      log "debootstrap is missing: install it (apt-get install debootstrap) or make a registry reachable"; exit 1
    fi
  }
  rootfs=$(mktemp -d /var/tmp/rewardbox-rootfs.XXXXXX)
  trap 'rm -rf "$rootfs"' EXIT
  debootstrap --variant=minbase --include=python3 bookworm "$rootfs" "$mirror" >/dev/null
  # Nothing the tests need: package caches, documentation, translations.
  rm -rf "$rootfs"/var/cache/apt/* "$rootfs"/var/lib/apt/lists/* "$rootfs"/usr/share/doc/* \
         "$rootfs"/usr/share/man/* "$rootfs"/usr/share/locale/* "$rootfs"/usr/share/info/*
  tar -C "$rootfs" -c . | docker import - "$local_base" >/dev/null
  log "imported $local_base"
}

docker info >/dev/null 2>&1 || { log "no Docker engine answers: start one (see README)"; exit 1; }
mkdir -p "$here/wheels"
python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.11 \
  -d "$here/wheels" -r "$here/requirements.txt" 2> >(grep -v "is ignored" >&2)
base=$(pick_base)
log "building $tag on $base"
# --network none: the build needs none (wheels are fetched above), and needs no bridge either.
DOCKER_BUILDKIT=0 docker build --quiet --network none --build-arg "BASE=$base" --label "rewardbox.image=python" -t "$tag" "$here" 2> >(grep -v -i -E "deprecated|buildx|buildkit|environment-variable|^ *$" >&2) >/dev/null
log "built $tag"
