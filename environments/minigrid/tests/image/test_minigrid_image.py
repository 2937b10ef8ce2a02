"""The MiniGrid environment image, tested the way an author tests theirs: with the epg pytest plugin.

The image is the one `epg-orchestrate images build env-minigrid` makes (built here through
the image builder when `--epg-image` is not given). It holds four Benchmarks: the plugin's
`epg_baselines` runs the one baseline on each of them. These tests need a Docker engine
and the orchestrator (which carries the plugin), so a fresh venv holding only the SDK and this
package runs `pytest tests --ignore=tests/image`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.docker

BENCHMARKS = ("MiniGrid-DoorKey-16x16-v0", "MiniGrid-FourRooms-v0", "MiniGrid-KeyCorridorS4R3-v0", "MiniGrid-ObstructedMaze-1Q-v1")


@pytest.fixture(scope="module")
def epg_package_dir() -> Path:
    """This package, whatever directory pytest runs from."""
    return Path(__file__).resolve().parents[2]


def test_every_conformance_check_passes_inside_the_image_for_all_four(epg_check_report):
    assert epg_check_report.benchmarks == BENCHMARKS
    assert [report.benchmark_id for report in epg_check_report.reports] == list(BENCHMARKS)
    assert all(len(report.checks) >= 6 for report in epg_check_report.reports)


def test_the_baseline_completes_every_episode_of_every_benchmark_through_the_sandbox(epg_baselines):
    assert sorted(epg_baselines) == list(BENCHMARKS)
    for benchmark_id, feedback in epg_baselines.items():
        count = len(feedback.episodes)
        assert count >= 1, benchmark_id
        assert [(e.index, e.status.value, e.failure) for e in feedback.episodes] == [(i, "completed", None) for i in range(count)], benchmark_id
        assert all(e.steps > 0 for e in feedback.episodes) and 0.0 <= feedback.score <= 1.0, benchmark_id
