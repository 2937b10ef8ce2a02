"""What every test of this repository's run shares, in whatever directory it lives: engine tests wait for the images.

`make test` (scripts/run-tests.sh) builds the images in the background while the tests that need no engine run, and
names in EPG_TEST_IMAGES_READY the file the build writes its exit status to when it ends. A `docker` test waits for
that file before it starts; a failed build fails the engine tests with the build's log. Without the variable (pytest
run by hand), nothing waits: the fixtures build what they need.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

IMAGES_READY = "EPG_TEST_IMAGES_READY"
WAIT_S = 45 * 60
_verdict: str | None = None


def images_build_verdict(ready: Path, log: Path | None, wait_s: float = WAIT_S) -> str:
    """Wait until ready holds the build's exit status; return "" when it is 0, else why the images are not there."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            status = ready.read_text().strip()
        except FileNotFoundError:
            time.sleep(1)
            continue
        if status == "0":
            return ""
        tail = log.read_text(errors="replace")[-4000:] if log is not None and log.exists() else ""
        return f"the images did not build (exit status {status or 'unknown'}):\n{tail}"
    return f"the images were not built within {wait_s:.0f} s"


def pytest_runtest_setup(item: pytest.Item) -> None:
    global _verdict
    ready = os.environ.get(IMAGES_READY)
    if not ready or item.get_closest_marker("docker") is None:
        return
    if _verdict is None:
        log = os.environ.get("EPG_TEST_IMAGES_LOG")
        _verdict = images_build_verdict(Path(ready), Path(log) if log else None)
    if _verdict:
        pytest.fail(_verdict, pytrace=False)
