"""The MountainCarContinuous-v0 environment image, tested the way an author tests theirs: with the epg pytest plugin.

The image is the one `epg-orchestrate images build env-mountaincar-continuous` makes (built here through
the image builder when `--epg-image` is not given). These tests need a Docker engine and the
orchestrator (which carries the plugin), so a fresh venv holding only the SDK and this package
runs `pytest tests --ignore=tests/image`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def epg_package_dir() -> Path:
    """This package, whatever directory pytest runs from."""
    return Path(__file__).resolve().parents[2]


def test_every_conformance_check_passes_inside_the_image(epg_check_report):
    assert epg_check_report.benchmarks == ("MountainCarContinuous-v0",)
    assert len(epg_check_report.reports[0].checks) >= 6


def test_the_baseline_completes_every_episode_through_the_sandbox(epg_baseline):
    count = len(epg_baseline.episodes)
    assert count >= 1
    assert [episode.index for episode in epg_baseline.episodes] == list(range(count))
    assert [(episode.status.value, episode.failure) for episode in epg_baseline.episodes] == [("completed", None)] * count
    assert all(episode.steps > 0 for episode in epg_baseline.episodes)
