#!/usr/bin/env bash
# Make a Docker daemon answer on this machine; do nothing where one already does.
# Installs Debian's docker.io when dockerd is missing, starts dockerd in the
# background when no daemon answers, waits until it is ready, and exits
# non-zero (with the daemon log tail) when it cannot.
set -euo pipefail

LOG=${EPG_DOCKERD_LOG:-/var/log/epg-dockerd.log}
WAIT_SECONDS=${EPG_DOCKERD_WAIT:-60}

answers() { docker info >/dev/null 2>&1; }

if command -v docker >/dev/null 2>&1 && answers; then
    echo "docker: daemon answers"
    exit 0
fi

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

if ! command -v dockerd >/dev/null 2>&1; then
    echo "docker: installing Debian's docker.io"
    export DEBIAN_FRONTEND=noninteractive
    as_root apt-get update -qq
    as_root apt-get install -y -qq docker.io >/dev/null
fi

if ! answers; then
    echo "docker: starting dockerd (log: $LOG)"
    as_root sh -c "nohup dockerd >'$LOG' 2>&1 &"
    for _ in $(seq "$WAIT_SECONDS"); do
        answers && break
        sleep 1
    done
fi

if ! answers; then
    echo "docker: no daemon answers after ${WAIT_SECONDS}s; dockerd log tail:" >&2
    tail -n 30 "$LOG" >&2 || true
    exit 1
fi
echo "docker: daemon answers"
