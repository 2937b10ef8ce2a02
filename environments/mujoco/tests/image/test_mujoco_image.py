"""The env-mujoco image, tested with the epg pytest plugin: the conformance checks inside it and the baseline through the sandbox.

The image is the one `epg-orchestrate images build env-mujoco` makes (built here through the
image builder when `--epg-image` is not given). `epg_baselines` runs the baseline of this
four-Benchmark image on each Benchmark through the real sandbox, and those same Episodes show
that the image renders each Benchmark's replay Episode. The uniform-random Program goes through
the sandbox in the Run of tests/docker/test_run_mujoco.py, and on all four Benchmarks in-process
(tests/test_mujoco_programs.py).
"""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

pytestmark = pytest.mark.docker

BENCHMARKS = ("HalfCheetah-v5", "Ant-v5", "Pusher-v5", "Reacher-v5")


def test_every_conformance_check_passes_inside_the_image(epg_check_report):
    assert sorted(epg_check_report.benchmarks) == sorted(BENCHMARKS)
    assert all(len(report.checks) >= 6 for report in epg_check_report.reports)


def test_the_baseline_completes_every_episode_of_every_benchmark(epg_completed_baselines):
    assert sorted(epg_completed_baselines) == sorted(BENCHMARKS)
    for benchmark_id, feedback in epg_completed_baselines.items():
        assert feedback.values["policy_failures"] == 0 and sum(feedback.values["ends"].values()) == len(feedback.episodes), benchmark_id
    assert epg_completed_baselines["HalfCheetah-v5"].values["means"]["x_distance_m"] > 20
    assert epg_completed_baselines["Reacher-v5"].score > -20


def test_the_image_renders_the_replay_episode_of_every_benchmark(epg_baselines):
    """libOSMesa is in the image: each Benchmark's Episode 0 comes back as a 3x3 contact sheet of distinct frames."""
    for benchmark_id, feedback in epg_baselines.items():
        assert feedback.values["replay"] == {"available": True, "episode": 0, "artifact": "replay.png"}, benchmark_id
        sheet = Image.open(io.BytesIO(feedback.artifacts["replay.png"]))
        assert (sheet.format, sheet.size) == ("PNG", (480, 480)) and len(feedback.artifacts["replay.png"]) <= 256 * 1024
        # The nine frames below their step labels: a rendered scene (many colours) that changed over the Episode.
        cells = np.asarray(sheet.convert("RGB")).reshape(3, 160, 3, 160, 3)[:, 14:].swapaxes(1, 2).reshape(9, -1, 3)
        assert len(np.unique(cells[0], axis=0)) > 16 and len({cell.tobytes() for cell in cells}) >= 2, benchmark_id
