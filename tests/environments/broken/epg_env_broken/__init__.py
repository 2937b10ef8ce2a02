"""Broken-v0: CartPole-v1 with overlapping splits, non-deterministic planning and hidden seeds in its Feedback."""

from __future__ import annotations

import json
import random

from epg_sdk.benchmark import Benchmark, EpisodeRecord, Feedback
from epg_sdk.gym_adapter import GymnasiumBenchmark
from epg_sdk.planning import plan_seeds


class BrokenBenchmark(GymnasiumBenchmark):
    """Each fault is one override; the checks in epg_sdk.checks must name all three."""

    def __init__(self) -> None:
        super().__init__(env_id="CartPole-v1", benchmark_id="Broken-v0", description="CartPole-v1 with three deliberate faults.",
                         horizon=500, failure_return=0.0)
        self._planned: list[bytes] = []

    def plan(self, split: str, seed: int, count: int) -> list[bytes]:
        payloads = [json.dumps({"seed": s}).encode() for s in plan_seeds("train", seed, count)]  # the split is ignored
        random.shuffle(payloads)  # not deterministic
        self._planned = payloads
        return payloads

    def feedback(self, records: list[EpisodeRecord]) -> Feedback:
        published = super().feedback(records)
        leaked = [payload.decode() for payload in self._planned]  # the hidden seeds, published
        return Feedback(score=published.score, values={**published.values, "episode_seeds": leaked}, artifacts=published.artifacts)


def make_benchmark() -> Benchmark:
    return BrokenBenchmark()
