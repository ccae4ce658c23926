#!/usr/bin/env bash
# Makes sure the Docker engine offers gVisor as the runtime `runsc`
# (`Sandbox(runtime="runsc")`, `rewardbox score|serve --runtime runsc`).
# Where it is missing and we are root on Debian: installs Debian's runsc,
# registers it in /etc/docker/daemon.json (other keys kept) and has the running
# dockerd reload that file with SIGHUP. dockerd is never restarted: runs in
# flight on it carry on. Ends with one real container under runsc.
set -euo pipefail
log() { echo "[gvisor] $*" >&2; }

RUNTIME=runsc
DAEMON_JSON=${DAEMON_JSON:-/etc/docker/daemon.json}
# The smoke test's image: the lean sandbox image of this checkout (`rewardbox image build`).
IMAGE=${IMAGE:-$("${PYTHON:-$(dirname "$0")/../.venv/bin/python}" -c 'from rewardbox.images import image_tag; print(image_tag())')}
# --network=none: runsc's own network stack off (Docker gives the sandbox none anyway).
# --oci-seccomp: the container's seccomp profile applies inside gVisor too, as under runc (the sandbox
# gives gVisor's containers one it can apply: rewardbox.sandbox.gvisor_seccomp).
# Platform: left at this Debian build's (2022-12) default, ptrace; its kvm
# platform hangs at boot in a VM without nested KVM, and systrap came later.
RUNSC_ARGS='["--network=none", "--oci-seccomp"]'

# Registered with exactly our arguments? (`docker info` shows the engine's live view.)
registered() {
  docker info --format '{{json .Runtimes}}' 2>/dev/null | python3 -c '
import json, sys
runtime = json.load(sys.stdin).get(sys.argv[1]) or {}
sys.exit(runtime.get("runtimeArgs") != json.loads(sys.argv[2]))' "$RUNTIME" "$RUNSC_ARGS"
}

smoke_test() {
  local out
  if ! out=$(docker run --rm --runtime="$RUNTIME" --network none "$IMAGE" python3 -c 'print(1)' 2>&1) \
      || [ "$out" != 1 ]; then
    log "a container under $RUNTIME did not run: $out"
    log "check gVisor on this kernel with: runsc --network=none do true"
    exit 1
  fi
}

if registered; then smoke_test; exit 0; fi

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null || ! pgrep -x dockerd >/dev/null; then
  log "the Docker engine has no '$RUNTIME' runtime. Install gVisor (Debian: 'apt-get install runsc';"
  log "elsewhere https://gvisor.dev/docs/user_guide/install/), add to $DAEMON_JSON"
  log "  {\"runtimes\": {\"$RUNTIME\": {\"path\": \"/usr/bin/runsc\", \"runtimeArgs\": $RUNSC_ARGS}}}"
  log "and reload the engine ('sudo kill -HUP \$(pidof dockerd)'), then run this again."
  exit 1
fi

if ! command -v runsc >/dev/null; then
  log "installing Debian's runsc (gVisor)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq runsc >/dev/null
fi

log "registering $(command -v runsc) as the engine's '$RUNTIME' runtime in $DAEMON_JSON"
mkdir -p "$(dirname "$DAEMON_JSON")"
python3 - "$DAEMON_JSON" "$RUNTIME" "$(command -v runsc)" "$RUNSC_ARGS" <<'EOF'
import json, os, sys
path, name, binary, args = sys.argv[1:]
config = {}
if os.path.exists(path):
    with open(path) as f:
        text = f.read()
    config = json.loads(text) if text.strip() else {}
config.setdefault("runtimes", {})[name] = {"path": binary, "runtimeArgs": json.loads(args)}
with open(path + ".tmp", "w") as f:
    json.dump(config, f, indent=2)
    f.write("\n")
os.replace(path + ".tmp", path)  # dockerd never reads half a file
EOF

# SIGHUP: dockerd re-reads daemon.json and takes the new runtimes; nothing stops.
log "reloading dockerd's configuration (SIGHUP, no restart)"
kill -HUP $(pgrep -x dockerd)
for _ in $(seq 20); do
  if registered; then smoke_test; log "runtime '$RUNTIME' ready"; exit 0; fi
  sleep 0.5
done
log "dockerd did not take the '$RUNTIME' runtime after SIGHUP; its log says why"
log "(with ensure-engine.sh: /var/log/rewardbox-dockerd.log). Is $DAEMON_JSON the file it reads?"
exit 1
