#!/usr/bin/env bash
# The test suite as `make test` (and so CI) runs it, in the order that takes least time on a fresh machine: one pytest
# run over JOBS processes (pytest-xdist, default 2, a file to a process), the tests that need no engine first, while
# `epg-orchestrate images build` (the test environments too) runs in the background; every engine test waits for that
# build to end (conftest.py) and fails with its log if it failed. Extra arguments go to pytest.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
JOBS=${JOBS:-2}
scratch=$(mktemp -d -t epg-tests-XXXXXX)
trap 'rm -rf "$scratch"' EXIT
export EPG_TEST_IMAGES_READY="$scratch/images.status" EPG_TEST_IMAGES_LOG="$scratch/images.log"

started=$(date +%s)
(
    "$BIN/epg-orchestrate" images build --environments tests/environments >"$EPG_TEST_IMAGES_LOG" 2>&1
    status=$?
    echo "run-tests: images built (exit status $status) after $(( $(date +%s) - started )) s: $(tail -n 1 "$EPG_TEST_IMAGES_LOG")" >&2
    echo "$status" >"$EPG_TEST_IMAGES_READY.tmp" && mv "$EPG_TEST_IMAGES_READY.tmp" "$EPG_TEST_IMAGES_READY"
) &
builder=$!

# --no-loadscope-reorder: files go out in the order conftest.py sorts them (engine-free first, slow files first in each
# part); without it pytest-xdist reorders them by their number of tests, which starts the one-test files (the tutorial,
# the CI workflow, the Runs) last, where the longest of them ends the run on one process while the other has nothing left.
"$BIN/python" -m pytest -n "$JOBS" --dist loadfile --no-loadscope-reorder --durations=30 "$@"
status=$?
wait "$builder"
exit "$status"
