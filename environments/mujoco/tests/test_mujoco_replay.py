"""The replay Episode: which Episode it is, its contact sheet, and what an image without a renderer says."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from PIL import Image

from epg_env_mujoco import make_reacher_benchmark
from epg_env_mujoco import replay as replay_module
from epg_env_mujoco.replay import FRAME_PIXELS, FRAMES, REPLAY_ARTIFACT, REPLAY_LIMIT_BYTES, contact_sheet
from epg_sdk.benchmark import Benchmark, EpisodeRecord
from epg_sdk.gym_adapter import GymnasiumBenchmark


@pytest.fixture(scope="module")
def reacher() -> Benchmark:
    return make_reacher_benchmark()


def test_index_0_of_every_plan_is_the_replay_episode_with_the_sdks_seeds(reacher: Benchmark) -> None:
    for split in ("train", "validation", "test"):
        payloads = [json.loads(p) for p in reacher.plan(split, 4, 5)]
        sdk_seeds = [json.loads(p)["seed"] for p in GymnasiumBenchmark.plan(reacher, split, 4, 5)]
        assert [p["seed"] for p in payloads] == sdk_seeds
        assert [p.get("replay") for p in payloads] == [True, None, None, None, None]
    assert reacher.plan("test", 4, 0) == []


def _run(benchmark: Benchmark, payload: bytes, steps: int):
    environment = benchmark.make_environment(payload)
    environment.reset()
    for _ in range(steps):
        environment.step(np.zeros(2, dtype=np.float32))
    summary, artifacts = environment.summary(), environment.artifacts()
    environment.close()
    return summary, artifacts


def test_without_a_renderer_the_replay_episode_runs_and_says_why_it_has_no_replay(reacher: Benchmark, monkeypatch) -> None:
    monkeypatch.setattr(replay_module, "BACKEND", None)
    first, other = reacher.plan("test", 0, 2)
    summary, artifacts = _run(reacher, first, 50)
    assert summary["steps"] == 50 and summary["end"] == "time_limit" and artifacts == {}
    assert summary["replay"] == {"available": False, "reason": replay_module.NO_BACKEND}
    summary_other, artifacts_other = _run(reacher, other, 3)
    assert "replay" not in summary_other and artifacts_other == {}


def test_a_failing_renderer_is_reported_not_raised(reacher: Benchmark, monkeypatch) -> None:
    def broken(env):
        raise OSError("libOSMesa.so.8: cannot open shared object file")

    monkeypatch.setattr(replay_module, "BACKEND", "osmesa")
    monkeypatch.setattr(replay_module, "_renderer", broken)
    summary, artifacts = _run(reacher, reacher.plan("test", 0, 1)[0], 5)
    assert artifacts == {} and summary["replay"]["available"] is False
    assert summary["replay"]["reason"] == "the osmesa renderer failed: OSError: libOSMesa.so.8: cannot open shared object file"


def test_the_contact_sheet_is_a_labelled_bounded_png_of_the_frames() -> None:
    rng = np.random.default_rng(0)
    frames = [(step, rng.integers(0, 255, size=(200, 200, 3), dtype=np.uint8)) for step in range(0, 9 * 6, 6)]
    data = contact_sheet(frames)
    image = Image.open(io.BytesIO(data))
    assert image.format == "PNG" and image.size == (3 * FRAME_PIXELS, 3 * FRAME_PIXELS) and len(data) <= REPLAY_LIMIT_BYTES
    two_rows = Image.open(io.BytesIO(contact_sheet(frames[:4])))
    assert two_rows.size == (3 * FRAME_PIXELS, 2 * FRAME_PIXELS)
    assert len(frames) == FRAMES


def _record(index: int, summary: dict, artifacts: dict | None = None) -> EpisodeRecord:
    return EpisodeRecord(index=index, status="completed", failure=None, steps=50, total_reward=-5.0, terminated=False,
                         truncated=True, summary={"end": "time_limit", "steps": 50, **summary}, artifacts=artifacts or {})


def test_feedback_publishes_the_replay_episodes_sheet_and_says_so(reacher: Benchmark) -> None:
    sheet = contact_sheet([(0, np.zeros((8, 8, 3), dtype=np.uint8))])
    rendered = {"available": True, "artifact": REPLAY_ARTIFACT, "frame_steps": [0]}
    feedback = reacher.feedback([_record(0, {"replay": rendered}, {REPLAY_ARTIFACT: sheet}), _record(1, {})])
    assert feedback.artifacts[REPLAY_ARTIFACT] == sheet and "episodes.csv" in feedback.artifacts
    assert feedback.values["replay"] == {"available": True, "episode": 0, "artifact": REPLAY_ARTIFACT}


def test_feedback_says_why_there_is_no_replay(reacher: Benchmark) -> None:
    missing = {"available": False, "reason": "no offscreen renderer"}
    feedback = reacher.feedback([_record(0, {"replay": missing}), _record(1, {})])
    assert REPLAY_ARTIFACT not in feedback.artifacts
    assert feedback.values["replay"] == {"available": False, "episode": 0, "reason": "no offscreen renderer"}
    later = reacher.feedback([_record(4, {}), _record(5, {})])
    assert later.values["replay"] == {"available": False, "reason": "this evaluation did not run the replay Episode (index 0 of its split)"}
