"""The dial Benchmark: mean return; an Episode ended by an invalid action scores FAILURE_RETURN."""

from __future__ import annotations

import hashlib
import statistics
from collections.abc import Sequence

from evopolicygym.authoring import BenchmarkSpec, Environment, EpisodeRecord, EpisodeSpec, Feedback

from .environment import HORIZON, DialEnvironment

SPLITS = ("train", "validation", "test")
FAILURE_RETURN = -1.0

SPEC = BenchmarkSpec(
    id="epg-test/strict-actions-dial-v1",
    description=(
        "Each step shows a hint (an int 0..999); answer its last digit as an exact int 0..9 for a reward of 1. "
        "Any other action (a bool, a float, 10, -1) is invalid: the Episode ends there as the policy's failure."
    ),
    observation_space={"type": "object", "fields": {"hint": {"type": "int", "minimum": 0, "maximum": 999},
                                                     "remaining": {"type": "int", "minimum": 0, "maximum": HORIZON}}},
    action_space={"type": "int", "minimum": 0, "maximum": 9},
    metadata={"invalid_actions": "raised from step"},
    max_episode_steps=HORIZON,
    primary_metric="mean_return",
    score_direction="maximize",
    environment_parameters={"horizon": HORIZON, "failure_return": FAILURE_RETURN},
)


class DialBenchmark:
    """Mean dial return; Feedback counts the Episodes that ended on an invalid action."""

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
        return DialEnvironment(episode)

    def feedback(self, episodes: Sequence[EpisodeRecord]) -> Feedback:
        records = tuple(episodes)
        if not records:
            raise ValueError("feedback needs at least one Episode")
        returns = [FAILURE_RETURN if r.policy_failure is not None else r.total_reward for r in records]
        score = statistics.fmean(returns)
        invalid = sum(1 for r in records if r.policy_failure == "invalid_action")
        return Feedback(
            score=score,
            content={
                "summary": f"mean return {score:.2f} over {len(records)} Episodes, {invalid} ended on an invalid action",
                "mean_return": score,
                "invalid_actions": invalid,
                "policy_failures": [r.policy_failure for r in records],
                "steps": [r.steps for r in records],
            },
        )


def _seed(split: str, seed: int, index: int) -> int:
    digest = hashlib.sha256(b"strict-actions/episode\0" + split.encode() + b"\0" + seed.to_bytes(8, "big") + index.to_bytes(8, "big"))
    return int.from_bytes(digest.digest()[:8], "big")


__all__ = ["DialBenchmark", "SPEC"]
