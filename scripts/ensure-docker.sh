#!/usr/bin/env bash
# Make a Docker daemon answer on this machine, with gVisor registered as runtime `runsc`.
# Installs Debian's docker.io when dockerd is missing and Debian's runsc when it
# is missing, adds `runsc` to /etc/docker/daemon.json (merged: other keys are
# kept), starts dockerd in the background when no daemon answers or reloads a
# running one (SIGHUP) when it lacks the runtime, and exits non-zero (with the
# daemon log tail) when the daemon does not answer or runsc is not registered.
# Idempotent: where everything is in place it changes nothing.
set -euo pipefail

LOG=${EPG_DOCKERD_LOG:-/var/log/epg-dockerd.log}
WAIT_SECONDS=${EPG_DOCKERD_WAIT:-60}
DAEMON_JSON=${EPG_DOCKER_DAEMON_JSON:-/etc/docker/daemon.json}

# --host-uds=open: a sandboxed process may connect to a host Unix socket on a
# bind mount (the policy's /epg/io/policy.sock, the agent's Host API and relay
# sockets); it still cannot create one on the host.
# --network=none: gVisor's own network stack with loopback only, never a copy
# of the container namespace's interfaces. Every container we sandbox has no
# network anyway, and Debian's runsc (20221219) cannot set up its default
# network on kernels that expose net.core.rmem_default in every namespace (it
# takes the fresh namespace for the root one and refuses to start).
RUNSC_ARGS="--host-uds=open --network=none"

answers() { docker info >/dev/null 2>&1; }
# The runsc entry the daemon reports must carry exactly RUNSC_ARGS.
has_runsc() {
    docker info --format '{{json .Runtimes}}' 2>/dev/null | python3 -c '
import json, sys
entry = json.load(sys.stdin).get("runsc") or {}
sys.exit(entry.get("runtimeArgs") != sys.argv[1:])' $RUNSC_ARGS
}
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
apt_install() {
    export DEBIAN_FRONTEND=noninteractive
    as_root apt-get update -qq
    as_root apt-get install -y -qq "$@" >/dev/null
}
fail() {
    echo "docker: $1; dockerd log tail ($LOG):" >&2
    tail -n 30 "$LOG" >&2 || true
    exit 1
}

if ! command -v dockerd >/dev/null 2>&1; then
    echo "docker: installing Debian's docker.io"
    apt_install docker.io
fi
if ! command -v runsc >/dev/null 2>&1; then
    echo "docker: installing Debian's runsc (gVisor)"
    apt_install runsc
fi
RUNSC=$(command -v runsc)

# shellcheck disable=SC2086  # RUNSC_ARGS is a list of words
changed=$(as_root python3 - "$DAEMON_JSON" "$RUNSC" $RUNSC_ARGS <<'PY'
import json, os, sys, tempfile

path, runsc, args = sys.argv[1], sys.argv[2], sys.argv[3:]
wanted = {"path": runsc, "runtimeArgs": args}
config = {}
if os.path.exists(path):
    text = open(path).read()
    if text.strip():
        try:
            config = json.loads(text)
        except ValueError as exc:
            sys.exit(f"docker: {path} is not valid JSON ({exc}); fix it by hand, it is left untouched")
    if not isinstance(config, dict):
        sys.exit(f"docker: {path} does not hold a JSON object; it is left untouched")
runtimes = config.setdefault("runtimes", {})
if runtimes.get("runsc") == wanted:
    print("no")
    sys.exit(0)
runtimes["runsc"] = wanted
os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
fd, temporary = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=".daemon.json.")
with os.fdopen(fd, "w") as handle:
    json.dump(config, handle, indent=2)
    handle.write("\n")
    handle.flush()
    os.fsync(handle.fileno())
os.chmod(temporary, 0o644)
os.replace(temporary, path)
print("yes")
PY
)
if [ "$changed" = yes ]; then
    echo "docker: registered runtime runsc ($RUNSC $RUNSC_ARGS) in $DAEMON_JSON"
fi

if answers; then
    if [ "$changed" = yes ] || ! has_runsc; then
        pid=$(cat /var/run/docker.pid 2>/dev/null || pidof dockerd 2>/dev/null || true)
        [ -n "$pid" ] || fail "a daemon answers but no dockerd process was found to reload"
        echo "docker: reloading dockerd (pid $pid) to pick up runtime runsc"
        as_root kill -HUP "$pid"
        for _ in $(seq "$WAIT_SECONDS"); do
            has_runsc && break
            sleep 1
        done
    fi
else
    # A pid file left by a daemon that is gone (a machine restored from a snapshot, a killed session) makes dockerd
    # refuse to start; remove it only when its pid is not a running dockerd.
    stale=$(cat /var/run/docker.pid 2>/dev/null || true)
    if [ -n "$stale" ] && [ "$(cat /proc/"$stale"/comm 2>/dev/null || true)" != dockerd ]; then
        echo "docker: removing the stale /var/run/docker.pid (pid $stale is not a running dockerd)"
        as_root rm -f /var/run/docker.pid
    fi
    echo "docker: starting dockerd (log: $LOG)"
    as_root sh -c "nohup dockerd >'$LOG' 2>&1 &"
    for _ in $(seq "$WAIT_SECONDS"); do
        answers && break
        sleep 1
    done
    answers || fail "no daemon answers after ${WAIT_SECONDS}s"
fi

has_runsc || fail "the daemon does not list runtime runsc with $RUNSC_ARGS (docker info --format '{{json .Runtimes}}': $(docker info --format '{{json .Runtimes}}' 2>&1))"
echo "docker: daemon answers; runtimes: $(docker info --format '{{json .Runtimes}}')"
