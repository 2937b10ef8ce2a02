#!/usr/bin/env bash
# The test suite as `make test` (and so CI) runs it, in the order that takes least time on a fresh machine:
#   1. the images build in the background (`epg-orchestrate images build`, with the test environments too), while
#   2. the engine-free tests run (pytest -m 'not docker'), then
#   3. the engine tests run once every image is there (pytest -m docker).
# Both pytest runs spread their tests over JOBS processes (pytest-xdist; default 2) and print their slowest tests.
# Exits non-zero when either pytest run fails or the images do not build (with the build's log).
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
JOBS=${JOBS:-2}
LOG=$(mktemp -t epg-images-XXXXXX.log)
trap 'rm -f "$LOG"' EXIT

started=$(date +%s)
"$BIN/epg-orchestrate" images build --environments tests/environments >"$LOG" 2>&1 &
builder=$!

status=0
"$BIN/python" -m pytest -m 'not docker' -n "$JOBS" --durations=15 "$@" || status=$?

if ! wait "$builder"; then
    tail -n 80 "$LOG" >&2
    echo "run-tests: the images did not build; the engine tests were not run" >&2
    exit 1
fi
echo "run-tests: images ready after $(( $(date +%s) - started )) s: $(tail -n 1 "$LOG")"

"$BIN/python" -m pytest -m docker -n "$JOBS" --durations=30 "$@" || status=$?
exit "$status"
