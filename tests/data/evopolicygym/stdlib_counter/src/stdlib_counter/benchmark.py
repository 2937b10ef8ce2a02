"""The counter Benchmark: plans (start, target, gust seed) scenarios and scores the mean return."""

from __future__ import annotations

import hashlib
import statistics
from collections.abc import Sequence

from evopolicygym.authoring import BenchmarkSpec, Environment, EpisodeRecord, EpisodeSpec, Feedback

from .environment import HORIZON, LOWER, UPPER, CounterEnvironment

SPLITS = ("train", "validation", "test")
FAILURE_RETURN = -float(HORIZON * (UPPER - LOWER + 1))

SPEC = BenchmarkSpec(
    id="epg-test/stdlib-counter-v1",
    description=(
        "Move a counter on the integers 0..20 to its target and hold it there: each step return -1, 0 or +1 (an exact int); "
        "every seventh step a gust moves it by one more. Reward is minus the distance after the step; the Episode ends "
        "when the counter is on target and the action was 0, or after 30 steps."
    ),
    observation_space={
        "type": "object",
        "fields": {
            "position": {"type": "int", "minimum": LOWER, "maximum": UPPER},
            "target": {"type": "int", "minimum": LOWER, "maximum": UPPER},
            "bounds": {"type": "tuple", "items": ["int", "int"]},
            "last_moves": {"type": "tuple", "items": "int", "max_length": 3},
            "steps_left": {"type": "int", "minimum": 0, "maximum": HORIZON},
        },
    },
    action_space={"type": "int", "values": [-1, 0, 1]},
    metadata={"family": "epg-test", "carrier_types": ("dict", "tuple", "int")},
    max_episode_steps=HORIZON,
    primary_metric="mean_return",
    score_direction="maximize",
    environment_parameters={"lower": LOWER, "upper": UPPER, "gust_every": 7, "horizon": HORIZON},
)


def derived_seed(domain: bytes, split: str, seed: int, index: int) -> int:
    """An unsigned 64-bit seed for Episode index of split under the plan's seed."""
    digest = hashlib.sha256(domain + split.encode() + b"\0" + seed.to_bytes(8, "big") + index.to_bytes(8, "big")).digest()
    return int.from_bytes(digest[:8], "big")


class CounterBenchmark:
    """Mean return of the counter over planned Episodes; a failed Episode scores FAILURE_RETURN."""

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
            scenario_seed = derived_seed(b"stdlib-counter/scenario\0", split, seed, index)
            start, target = scenario_seed % (UPPER + 1), (scenario_seed >> 8) % (UPPER + 1)
            gust_seed = derived_seed(b"stdlib-counter/gusts\0", split, seed, index)
            planned.append(EpisodeSpec(
                environment_seed=derived_seed(b"stdlib-counter/environment\0", split, seed, index),
                scenario=(start, target, gust_seed),
            ))
        return tuple(planned)

    def make_environment(self, episode: EpisodeSpec) -> Environment:
        return CounterEnvironment(episode)

    def feedback(self, episodes: Sequence[EpisodeRecord]) -> Feedback:
        records = tuple(episodes)
        if not records:
            raise ValueError("feedback needs at least one Episode")
        returns = [FAILURE_RETURN if r.policy_failure is not None else r.total_reward for r in records]
        held = sum(1 for r in records if r.transitions and r.transitions[-1].step.terminated)
        score = statistics.fmean(returns)
        return Feedback(
            score=score,
            content={
                "summary": f"mean return {score:.2f} over {len(records)} Episodes, target held in {held}",
                "mean_return": score,
                "episodes": len(records),
                "targets_held": held,
                "policy_failures": sum(1 for r in records if r.policy_failure is not None),
                "steps": tuple(r.steps for r in records),
            },
        )


__all__ = ["CounterBenchmark", "SPEC"]
