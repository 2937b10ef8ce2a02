#!/usr/bin/env bash
# Make Debian's headless-capable Chromium available for the tests that open HTML reports in a browser.
# Installs the `chromium` package with apt when no chromium executable is found (EPG_CHROMIUM names
# another one); exits non-zero when it still cannot run one. Idempotent: where it is in place it changes nothing.
set -euo pipefail

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
find_chromium() {
    if [ -n "${EPG_CHROMIUM:-}" ]; then command -v "$EPG_CHROMIUM"; return; fi
    command -v chromium || command -v chromium-browser
}

if ! find_chromium >/dev/null 2>&1; then
    echo "chromium: installing Debian's chromium"
    export DEBIAN_FRONTEND=noninteractive
    as_root apt-get update -qq
    as_root apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi
CHROMIUM=$(find_chromium) || { echo "chromium: no chromium executable after installing Debian's chromium" >&2; exit 1; }
if ! version=$("$CHROMIUM" --headless --no-sandbox --version 2>&1); then
    echo "chromium: $CHROMIUM does not run: $version" >&2
    exit 1
fi
echo "chromium: $version ($CHROMIUM)"
