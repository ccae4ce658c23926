#!/usr/bin/env bash
# Builds the service image TAG (argument 1): rewardbox and its dependencies,
# installed on the host for the image's Python (3.11, glibc 2.36, this
# machine's architecture) into a staging dir, then copied into the image. The
# base is the sandbox image's, picked by `rewardbox image base`
# (rewardbox.images.build.pick_base: $REWARDBOX_BASE_IMAGE, else
# python:3.11-slim-bookworm if present or pullable, else a debootstrapped
# rewardbox/debian-base:bookworm).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
tag=${1:?usage: build.sh TAG}
python=${PYTHON:-python3}

log() { echo "[service-image] $*" >&2; }

docker info >/dev/null 2>&1 || { log "no Docker engine answers: start one (see README)"; exit 1; }
stage=$(mktemp -d /var/tmp/rewardbox-service.XXXXXX)
trap 'rm -rf "$stage"' EXIT
# Wheels that run on bookworm's glibc 2.36: pip takes each tag literally, so list them all.
platforms=()
for minor in $(seq 36 -1 17); do platforms+=(--platform "manylinux_2_${minor}_$(uname -m)"); done
platforms+=(--platform "manylinux2014_$(uname -m)")
# The wheel of rewardbox itself, then it and its dependencies (binary wheels
# only, pinned by constraints.txt) for the image's interpreter, not the host's.
# Built from a copy: setuptools leaves build/ behind in the tree it builds.
mkdir -p "$stage/src"
for path in pyproject.toml README.md LICENSE rewardbox sandbox rewards images; do
  if [ -e "$root/$path" ]; then cp -r "$root/$path" "$stage/src/"; fi
done
find "$stage/src" -name __pycache__ -prune -exec rm -rf {} +
# The source's digest, as a label: tests/docker/test_stops.py rebuilds an image made from other code.
digest=$(cd "$stage/src" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
"$python" -m pip wheel --quiet --no-deps -w "$stage/wheel" "$stage/src" 2> >(grep -v "is ignored" >&2)
"$python" -m pip install --quiet --disable-pip-version-check --no-compile --target "$stage/context/lib" \
  --only-binary=:all: --implementation cp --python-version 3.11 --abi cp311 \
  "${platforms[@]}" -c "$root/constraints.txt" "$stage"/wheel/rewardbox-*.whl \
  2> >(grep -v "is ignored" >&2)
rm -rf "$stage/context/lib/bin"  # console scripts with the host's interpreter path; the image runs python3 -m
cp "$here/Dockerfile" "$stage/context/"
base=$("$python" -m rewardbox image base)
log "building $tag on $base"
DOCKER_BUILDKIT=0 docker build --quiet --build-arg "BASE=$base" --label "rewardbox.image=service" \
  --label "rewardbox.source=$digest" -t "$tag" "$stage/context" \
  2> >(grep -v -i -E "deprecated|buildx|buildkit|environment-variable|^ *$" >&2) >/dev/null
log "built $tag"
