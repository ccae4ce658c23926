#!/usr/bin/env bash
# Makes sure a Docker engine answers. Where none does and we are root on a
# Debian-like system, installs Debian's docker.io and starts dockerd, saying so;
# elsewhere stops with what to install.
set -euo pipefail
log() { echo "[engine] $*" >&2; }

if docker info >/dev/null 2>&1; then exit 0; fi

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  log "no Docker engine answers. Install Docker Engine (https://docs.docker.com/engine/install/),"
  log "start it (e.g. 'sudo systemctl start docker'), make sure your user may use it, and run this again."
  exit 1
fi

if ! command -v dockerd >/dev/null; then
  log "no Docker engine installed: installing Debian's docker.io"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null
fi

if ! { command -v pgrep >/dev/null && pgrep -x dockerd >/dev/null; }; then
  log "starting dockerd in the background (log: /var/log/rewardbox-dockerd.log)"
  nohup dockerd >/var/log/rewardbox-dockerd.log 2>&1 &
fi
for _ in $(seq 60); do
  if docker info >/dev/null 2>&1; then log "engine running"; exit 0; fi
  sleep 1
done
log "dockerd did not come up within 60 s; see /var/log/rewardbox-dockerd.log"
exit 1
