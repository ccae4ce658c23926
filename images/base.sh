# Sourced by the image builds: which base image to build on.
#   1. $REWARDBOX_BASE_IMAGE if set;
#   2. python:3.11-slim-bookworm if present or pullable (a registry is reachable);
#   3. rewardbox/debian-base:bookworm if present (made by `make sandbox-image`
#      with debootstrap where no registry is reachable);
#   4. else the build's own `no_base` function, which prints a base or exits.
# Needs a `log` function.
registry_base=python:3.11-slim-bookworm
local_base=rewardbox/debian-base:bookworm

pick_base() {
  if [ -n "${REWARDBOX_BASE_IMAGE:-}" ]; then echo "$REWARDBOX_BASE_IMAGE"; return; fi
  if docker image inspect "$registry_base" >/dev/null 2>&1; then echo "$registry_base"; return; fi
  if docker image inspect "$local_base" >/dev/null 2>&1; then echo "$local_base"; return; fi
  log "trying to pull $registry_base"
  if timeout 120 docker pull -q "$registry_base" >/dev/null 2>&1; then echo "$registry_base"; return; fi
  no_base
}
