#!/usr/bin/env bash
# Make Debian's Chromium available for the tests that open HTML reports in a headless browser.
# Installs the `chromium` package with apt when no chromium executable is on PATH; EPG_CHROMIUM names
# another executable instead (never installed). Exits non-zero when no Chromium runs afterwards.
# Idempotent: where it is in place it changes nothing.
set -euo pipefail

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

if [ -n "${EPG_CHROMIUM:-}" ]; then
    CHROMIUM=$(command -v "$EPG_CHROMIUM") || { echo "chromium: EPG_CHROMIUM=$EPG_CHROMIUM is not an executable" >&2; exit 1; }
else
    if ! command -v chromium >/dev/null 2>&1; then
        echo "chromium: installing Debian's chromium"
        export DEBIAN_FRONTEND=noninteractive
        as_root apt-get update -qq
        as_root apt-get install -y -qq --no-install-recommends chromium >/dev/null
    fi
    CHROMIUM=$(command -v chromium) || { echo "chromium: no chromium executable after installing Debian's chromium" >&2; exit 1; }
fi
# Debian's wrapper script may print a shell warning before the version: keep the last line.
if ! output=$("$CHROMIUM" --headless --no-sandbox --version 2>&1); then
    echo "chromium: $CHROMIUM does not run: $output" >&2
    exit 1
fi
echo "chromium: $(printf '%s\n' "$output" | tail -n 1) ($CHROMIUM)"
