"""The pixel grid Benchmark: Feedback built from whole trajectories, published as path artifacts.

Every Feedback carries `summary.json` (permanent), and per Episode `episode-NNN/frames.bin` (bulk: every observation
frame of the Episode, initial one included, concatenated) and `episode-NNN/replay.ppm` (a strip of those frames).
"""

from __future__ import annotations

import hashlib
import json
import statistics
from collections.abc import Sequence

from evopolicygym.authoring import Artifact, BenchmarkSpec, Environment, EpisodeRecord, EpisodeSpec, Feedback
from evopolicygym.policy import PolicyValue, TensorValue

from .environment import FRAME_SHAPE, HORIZON, MOVES, SIZE, GridEnvironment

SPLITS = ("train", "validation", "test")
FAILURE_RETURN = -0.05 * HORIZON - 1.0

SPEC = BenchmarkSpec(
    id="epg-test/pixels-grid-v1",
    description=(
        "A 16x16 grid seen as an RGB frame: the green cell is you, the red cell the target. Each step return an int "
        "0..4 (stay, up, down, left, right). Reward -0.05 a step and +1 on reaching the target, which ends the Episode; "
        "at most 40 steps."
    ),
    observation_space={
        "type": "object",
        "fields": {
            "frame": {"type": "tensor", "dtype": "uint8", "shape": list(FRAME_SHAPE), "layout": "row-major HWC RGB"},
            "step": {"type": "int", "minimum": 0, "maximum": HORIZON},
        },
    },
    action_space={"type": "int", "minimum": 0, "maximum": len(MOVES) - 1, "meanings": ["stay", "up", "down", "left", "right"]},
    metadata={"frame_shape": FRAME_SHAPE, "artifacts": ("summary.json", "episode-NNN/frames.bin", "episode-NNN/replay.ppm")},
    max_episode_steps=HORIZON,
    primary_metric="mean_return",
    score_direction="maximize",
    environment_parameters={"size": SIZE, "horizon": HORIZON, "step_cost": 0.05, "arrival_reward": 1.0},
)


class PixelsBenchmark:
    """Mean return over planned grids; Feedback counts and publishes every frame it was given."""

    @property
    def spec(self) -> BenchmarkSpec:
        return SPEC

    def episodes(self, split: str, *, seed: int, count: int) -> Sequence[EpisodeSpec]:
        if split not in SPLITS:
            raise ValueError(f"split must be one of {', '.join(SPLITS)}")
        if type(count) is not int or count <= 0:
            raise ValueError("count must be a positive integer")
        planned = []
        for index in range(count):
            digest = hashlib.sha256(b"pixels/episode\0" + split.encode() + b"\0" + seed.to_bytes(8, "big") + index.to_bytes(8, "big")).digest()
            agent = (digest[0] % SIZE, digest[1] % SIZE)
            target = (digest[2] % SIZE, digest[3] % SIZE)
            if target == agent:
                target = ((agent[0] + SIZE // 2) % SIZE, agent[1])
            planned.append(EpisodeSpec(environment_seed=int.from_bytes(digest[8:16], "big"), scenario=(*agent, *target)))
        return tuple(planned)

    def make_environment(self, episode: EpisodeSpec) -> Environment:
        return GridEnvironment(episode)

    def feedback(self, episodes: Sequence[EpisodeRecord]) -> Feedback:
        records = tuple(episodes)
        if not records:
            raise ValueError("feedback needs at least one Episode")
        artifacts: list[Artifact] = []
        observation_frames = metric_frames = 0
        for index, record in enumerate(records):
            frames = _observation_frames(record)
            observation_frames += len(frames)
            metric_frames += sum(1 for t in record.transitions if isinstance(t.step.metrics, dict)
                                 and type(t.step.metrics.get("visits")) is TensorValue)
            folder = f"episode-{index:03d}"
            artifacts.append(Artifact(name=f"{folder}/frames.bin", media_type="application/octet-stream",
                                      content=b"".join(frame.data for frame in frames), retention="bulk"))
            artifacts.append(Artifact(name=f"{folder}/replay.ppm", media_type="image/x-portable-pixmap", content=_strip(frames)))
        returns = [FAILURE_RETURN if r.policy_failure is not None else r.total_reward for r in records]
        score = statistics.fmean(returns)
        summary: dict[str, PolicyValue] = {
            "episodes": len(records),
            "steps": [r.steps for r in records],
            "observation_frames": observation_frames,
            "metric_frames": metric_frames,
            "reached": sum(1 for r in records if r.transitions and r.transitions[-1].step.terminated),
            "policy_failures": sum(1 for r in records if r.policy_failure is not None),
            "mean_return": score,
        }
        artifacts.insert(0, Artifact(name="summary.json", media_type="application/json",
                                     content=json.dumps(summary, sort_keys=True).encode(), retention="permanent"))
        return Feedback(score=score, content=summary, artifacts=tuple(artifacts))


def _observation_frames(record: EpisodeRecord) -> list[TensorValue]:
    """Every frame the policy saw in one Episode, the initial observation's first."""
    observations = [record.initial_observation, *(t.step.observation for t in record.transitions)]
    frames = []
    for observation in observations:
        frame = observation.get("frame") if isinstance(observation, dict) else None
        if isinstance(frame, TensorValue):
            frames.append(frame)
    return frames


def _strip(frames: Sequence[TensorValue]) -> bytes:
    """A binary PPM (P6) of the frames side by side, left to right in Episode order."""
    width = SIZE * max(len(frames), 1)
    rows = []
    for y in range(SIZE):
        row = b"".join(frame.data[y * SIZE * 3:(y + 1) * SIZE * 3] for frame in frames) or bytes(SIZE * 3)
        rows.append(row)
    return f"P6\n{width} {SIZE}\n255\n".encode() + b"".join(rows)


__all__ = ["PixelsBenchmark", "SPEC"]
