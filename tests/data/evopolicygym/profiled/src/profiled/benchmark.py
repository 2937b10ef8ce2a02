"""The drifting-point Benchmark: one Benchmark identity per profile, each with its own public parameters."""

from __future__ import annotations

import hashlib
import statistics
from collections.abc import Sequence

from evopolicygym.authoring import BenchmarkSpec, Environment, EpisodeRecord, EpisodeSpec, Feedback

from .config import ProfiledConfig
from .environment import DriftEnvironment

SPLITS = ("train", "validation", "test")


def _spec(config: ProfiledConfig) -> BenchmarkSpec:
    return BenchmarkSpec(
        id=f"epg-test/profiled/{config.profile}-v1",
        description=(
            f"Keep a drifting point near 0 ({config.profile} profile: drift {config.drift} a step, noise up to "
            f"{config.noise}). Each step return one float push in [-1, 1]; reward is minus the distance from 0 after the "
            f"step; {config.horizon} steps."
        ),
        observation_space={"type": "object", "fields": {"x": {"type": "float"}, "steps_left": {"type": "float"}}},
        action_space={"type": "float", "minimum": -1.0, "maximum": 1.0},
        metadata={"profile": config.profile},
        max_episode_steps=config.horizon,
        primary_metric="mean_return",
        score_direction="maximize",
        environment_parameters={"profile": config.profile, "horizon": config.horizon, "drift": config.drift,
                                "noise": config.noise, "failure_return": _failure_return(config)},
    )


def _failure_return(config: ProfiledConfig) -> float:
    return -10.0 * config.horizon


class ProfiledBenchmark:
    """Mean return of the drifting point under one profile (the config's; the first of PROFILES by default)."""

    def __init__(self, config: ProfiledConfig | None = None) -> None:
        if config is None:
            config = ProfiledConfig()
        if type(config) is not ProfiledConfig:
            raise TypeError("config must be ProfiledConfig")
        self._config = config
        self._spec = _spec(config)

    @property
    def spec(self) -> BenchmarkSpec:
        return self._spec

    def episodes(self, split: str, *, seed: int, count: int) -> Sequence[EpisodeSpec]:
        if split not in SPLITS:
            raise ValueError(f"split must be one of {', '.join(SPLITS)}")
        if type(count) is not int or count <= 0:
            raise ValueError("count must be a positive integer")
        domain = f"profiled/{self._config.profile}/episode\0".encode()
        return tuple(
            EpisodeSpec(environment_seed=int.from_bytes(hashlib.sha256(
                domain + split.encode() + b"\0" + seed.to_bytes(8, "big") + index.to_bytes(8, "big")).digest()[:8], "big"))
            for index in range(count)
        )

    def make_environment(self, episode: EpisodeSpec) -> Environment:
        return DriftEnvironment(episode, self._config)

    def feedback(self, episodes: Sequence[EpisodeRecord]) -> Feedback:
        records = tuple(episodes)
        if not records:
            raise ValueError("feedback needs at least one Episode")
        failure = _failure_return(self._config)
        score = statistics.fmean(failure if r.policy_failure is not None else r.total_reward for r in records)
        return Feedback(score=score, content={"profile": self._config.profile, "mean_return": score, "episodes": len(records),
                                              "policy_failures": sum(1 for r in records if r.policy_failure is not None)})


__all__ = ["ProfiledBenchmark"]
