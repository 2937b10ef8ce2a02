"""The env-box2d image, tested the way an author tests theirs: with the epg pytest plugin.

The image is the one `epg-orchestrate images build env-box2d` makes (built here through the
image builder when `--epg-image` is not given). It holds two Benchmarks, so the baseline runs
through the sandbox once per Benchmark with the plugin's `epg_baselines` fixture (each Episode in
a fresh hardened policy container).
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.docker

BENCHMARKS = ("BipedalWalker-v3", "CarRacing-v3")


def test_every_conformance_check_passes_inside_the_image(epg_check_report):
    assert epg_check_report.benchmarks == BENCHMARKS
    assert all(len(report.checks) >= 6 for report in epg_check_report.reports)


def test_the_baseline_completes_every_episode_of_both_benchmarks_through_the_sandbox(epg_completed_baselines):
    assert set(epg_completed_baselines) == set(BENCHMARKS)
    for benchmark_id, feedback in epg_completed_baselines.items():
        assert [row["summary"]["end"] for row in feedback.values["episodes"]] != [], benchmark_id
    walker, racer = epg_completed_baselines["BipedalWalker-v3"], epg_completed_baselines["CarRacing-v3"]
    assert all(row["summary"]["distance_m"] > 10.0 for row in walker.values["episodes"])
    assert all(row["summary"]["tiles_visited"] > 0 for row in racer.values["episodes"])
    assert all(e.steps == 1000 for e in racer.episodes) and racer.score > 0.0
