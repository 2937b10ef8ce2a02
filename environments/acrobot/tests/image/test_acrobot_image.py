"""The Acrobot-v1 environment image, tested the way an author tests theirs: with the epg pytest plugin.

The image is the one `epg-orchestrate images build env-acrobot` makes (built here through
the image builder when `--epg-image` is not given). These tests need a Docker engine and the
orchestrator (which carries the plugin); in a venv holding only the SDK and this package they
are skipped, saying so (conftest.py).
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.docker


def test_every_conformance_check_passes_inside_the_image(epg_check_report):
    assert epg_check_report.benchmarks == ("Acrobot-v1",)
    assert len(epg_check_report.reports[0].checks) >= 6


def test_the_baseline_completes_every_episode_through_the_sandbox(epg_completed_baseline):
    assert epg_completed_baseline.episodes
