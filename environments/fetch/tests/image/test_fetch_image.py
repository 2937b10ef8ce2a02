"""The env-fetch image, tested the way an author tests theirs: with the epg pytest plugin, and `env test` on that image.

The image is the one `epg-orchestrate images build env-fetch` makes (built here through the
image builder when `--epg-image` is not given). The plugin's `epg_baseline` runs the baseline
of an image holding exactly one Benchmark; this one holds two, so the baseline goes through the
sandbox with `epg-orchestrate env test IMAGE --baseline DIR` (the plugin's `epg_env_test`), which
checks every Benchmark of that very image. Its containers carry a scope label of the fixture's
own, and none may be left afterwards. The uniform-random Program goes through the sandbox in the
Run of tests/docker/test_run_fetch.py, and on both Benchmarks in-process (tests/test_fetch_programs.py).
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.docker

BENCHMARKS = ("FetchPickAndPlace-v4", "FetchPush-v4")  # in sorted order, as the image lists them
SANDBOX_CHECK = "baseline runs through the sandbox (3 Episodes)"


def test_every_conformance_check_passes_inside_the_image(epg_check_report):
    assert epg_check_report.benchmarks == BENCHMARKS
    assert all(len(report.checks) >= 6 for report in epg_check_report.reports)


def test_the_baseline_completes_every_episode_of_both_benchmarks_through_the_sandbox(epg_env_test, epg_image, epg_package_dir):
    report = epg_env_test(epg_package_dir / "baseline")
    assert report["image"] == epg_image and report["benchmarks"] == list(BENCHMARKS)
    assert report["ok"] is True, [c for c in report["checks"] if not c["ok"]]
    sandbox = {c["benchmark"]: c["detail"] for c in report["checks"] if c["name"] == SANDBOX_CHECK}
    assert set(sandbox) == set(BENCHMARKS)
    assert all(detail.startswith("score ") for detail in sandbox.values())
