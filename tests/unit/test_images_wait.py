"""The wait of engine tests for the images `make test` builds beside them (the repository's conftest.py)."""

from __future__ import annotations

import importlib.util
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def load_root_conftest():
    spec = importlib.util.spec_from_file_location("repository_conftest", REPO / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_an_engine_test_waits_until_the_build_ends_and_goes_on_when_it_succeeded(tmp_path):
    verdict = load_root_conftest().images_build_verdict
    ready = tmp_path / "status"
    threading.Timer(1.5, ready.write_text, args=("0\n",)).start()
    started = time.monotonic()
    assert verdict(ready, None, wait_s=30) == ""
    assert time.monotonic() - started >= 1.4  # it waited for the file


def test_a_failed_build_is_the_reason_with_the_tail_of_its_log(tmp_path):
    verdict = load_root_conftest().images_build_verdict
    (tmp_path / "status").write_text("3\n")
    (tmp_path / "log").write_text("step 1\nerror: docker build of epg/env-x failed\n")
    reason = verdict(tmp_path / "status", tmp_path / "log", wait_s=5)
    assert reason.startswith("the images did not build (exit status 3)") and "docker build of epg/env-x failed" in reason


def test_a_build_that_never_ends_is_a_failure_after_the_wait(tmp_path):
    verdict = load_root_conftest().images_build_verdict
    assert verdict(tmp_path / "status", None, wait_s=1.2) == "the images were not built within 1 s"
