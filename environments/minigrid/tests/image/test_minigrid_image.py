"""The MiniGrid environment image, tested the way an author tests theirs: with the epg pytest plugin.

The image is the one `epg-orchestrate images build env-minigrid` makes (built here through
the image builder when `--epg-image` is not given). It holds four Benchmarks: the plugin's
`epg_baselines` runs the one baseline on each of them. These tests need a Docker engine
and the orchestrator (which carries the plugin); in a venv holding only the SDK and this
package they are skipped, saying so (conftest.py).
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.docker

BENCHMARKS = ("MiniGrid-DoorKey-16x16-v0", "MiniGrid-FourRooms-v0", "MiniGrid-KeyCorridorS4R3-v0", "MiniGrid-ObstructedMaze-1Q-v1")


def test_every_conformance_check_passes_inside_the_image_for_all_four(epg_check_report):
    assert epg_check_report.benchmarks == BENCHMARKS
    assert [report.benchmark_id for report in epg_check_report.reports] == list(BENCHMARKS)
    assert all(len(report.checks) >= 6 for report in epg_check_report.reports)


def test_the_baseline_completes_every_episode_of_every_benchmark_through_the_sandbox(epg_completed_baselines):
    assert sorted(epg_completed_baselines) == list(BENCHMARKS)
    for benchmark_id, feedback in epg_completed_baselines.items():
        assert 0.0 <= feedback.score <= 1.0, benchmark_id
