"""The Pendulum Benchmark: seeded Episodes of Pendulum-v1, scored by mean return."""

from __future__ import annotations

import hashlib
import statistics
from collections.abc import Sequence

from evopolicygym.authoring import BenchmarkSpec, Environment, EpisodeRecord, EpisodeSpec, Feedback

from .environment import HORIZON, MAX_TORQUE, PendulumEnvironment

SPLITS = ("train", "validation", "test")
# Below the worst return of a completed Episode (about -16.3 a step).
FAILURE_RETURN = -17.0 * HORIZON

SPEC = BenchmarkSpec(
    id="epg-test/gymnasium/Pendulum-v1/short-v1",
    description=(
        "Swing up and balance Gymnasium's Pendulum-v1 for 50 steps. The observation is the list "
        "[cos(theta), sin(theta), angular velocity]; return one float torque in [-2, 2]. Maximize the mean return."
    ),
    observation_space={"type": "list", "items": "float", "length": 3, "fields": ["cos_theta", "sin_theta", "angular_velocity"]},
    action_space={"type": "float", "minimum": -MAX_TORQUE, "maximum": MAX_TORQUE},
    metadata={"environment": "Pendulum-v1", "provider": "Gymnasium"},
    max_episode_steps=HORIZON,
    primary_metric="mean_return",
    score_direction="maximize",
    environment_parameters={"time_limit": HORIZON, "maximum_torque": MAX_TORQUE, "failure_return": FAILURE_RETURN},
)


class PendulumBenchmark:
    """Mean Pendulum return over planned Episodes; a failed Episode scores FAILURE_RETURN."""

    @property
    def spec(self) -> BenchmarkSpec:
        return SPEC

    def episodes(self, split: str, *, seed: int, count: int) -> Sequence[EpisodeSpec]:
        if split not in SPLITS:
            raise ValueError(f"split must be one of {', '.join(SPLITS)}")
        if type(count) is not int or count <= 0:
            raise ValueError("count must be a positive integer")
        return tuple(EpisodeSpec(environment_seed=_seed(split, seed, index)) for index in range(count))

    def make_environment(self, episode: EpisodeSpec) -> Environment:
        return PendulumEnvironment(episode)

    def feedback(self, episodes: Sequence[EpisodeRecord]) -> Feedback:
        records = tuple(episodes)
        if not records:
            raise ValueError("feedback needs at least one Episode")
        returns = [FAILURE_RETURN if r.policy_failure is not None else r.total_reward for r in records]
        score = statistics.fmean(returns)
        final_angles = [angle for angle in map(_final_angle, records) if angle is not None]
        return Feedback(
            score=score,
            content={
                "summary": f"mean return {score:.2f} over {len(records)} Episodes",
                "mean_return": score,
                "episodes": len(records),
                "policy_failures": sum(1 for r in records if r.policy_failure is not None),
                "mean_final_angle": statistics.fmean(final_angles) if final_angles else None,
            },
        )


def _final_angle(record: EpisodeRecord) -> float | None:
    """The absolute angle after the last step of a completed Episode (from its step metrics), else None."""
    if record.policy_failure is not None or not record.transitions:
        return None
    metrics = record.transitions[-1].step.metrics
    angle = metrics.get("angle") if isinstance(metrics, dict) else None
    return abs(angle) if isinstance(angle, float) else None


def _seed(split: str, seed: int, index: int) -> int:
    digest = hashlib.sha256(b"gym-pendulum/episode\0" + split.encode() + b"\0" + seed.to_bytes(8, "big") + index.to_bytes(8, "big"))
    return int.from_bytes(digest.digest()[:8], "big")


__all__ = ["PendulumBenchmark", "SPEC"]
