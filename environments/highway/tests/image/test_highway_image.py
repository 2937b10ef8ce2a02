"""The env-highway image, tested the way an author tests theirs: with the epg pytest plugin.

The image is the one `epg-orchestrate images build env-highway` makes (built here through the
image builder when `--epg-image` is not given). It holds two Benchmarks, so the baseline runs
through the sandbox once per Benchmark with the plugin's `epg_baselines` fixture (each Episode in
a fresh hardened policy container). The uniform-random Program goes through the sandbox in the
Run of tests/docker/test_run_highway.py, and on both Benchmarks in-process (tests/test_highway_programs.py).
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.docker

BENCHMARKS = ("parking-v0", "roundabout-v0")


def test_every_conformance_check_passes_inside_the_image(epg_check_report):
    assert epg_check_report.benchmarks == BENCHMARKS
    assert all(len(report.checks) >= 6 for report in epg_check_report.reports)


def test_the_baseline_completes_every_episode_of_both_benchmarks_through_the_sandbox(epg_completed_baselines):
    assert sorted(epg_completed_baselines) == list(BENCHMARKS)
    for benchmark_id, feedback in epg_completed_baselines.items():
        assert feedback.values["policy_failures"] == 0, benchmark_id
        assert sum(feedback.values["ends"].values()) == len(feedback.episodes), benchmark_id
