"""Stand-in of `evopolicygym.authoring`: the Benchmark author's value types."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from evopolicygym.policy import PolicyValue, copy_policy_value

_FAILURES = {"exception", "timeout", "invalid_action", "protocol_error"}


class InvalidAction(Exception):
    """An action outside the Environment's action domain, raised from step."""


@dataclass(frozen=True, slots=True)
class EpisodeSpec:
    environment_seed: int
    scenario: PolicyValue = None

    def __post_init__(self) -> None:
        if type(self.environment_seed) is not int or not 0 <= self.environment_seed < 2**64:
            raise ValueError("environment_seed must be an unsigned 64-bit integer")
        object.__setattr__(self, "scenario", copy_policy_value(self.scenario))


@dataclass(frozen=True, slots=True)
class Step:
    observation: PolicyValue
    reward: float
    terminated: bool
    truncated: bool = False
    metrics: PolicyValue = None

    def __post_init__(self) -> None:
        if isinstance(self.reward, bool) or not isinstance(self.reward, (int, float)) or not math.isfinite(self.reward):
            raise ValueError("reward must be a finite number")
        object.__setattr__(self, "reward", float(self.reward))
        object.__setattr__(self, "observation", copy_policy_value(self.observation))
        object.__setattr__(self, "metrics", copy_policy_value(self.metrics))

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated


@dataclass(frozen=True, slots=True)
class Transition:
    action: PolicyValue
    step: Step


@dataclass(frozen=True, slots=True)
class EpisodeRecord:
    episode: EpisodeSpec
    policy_seed: int
    initial_observation: PolicyValue
    transitions: tuple[Transition, ...]
    policy_failure: str | None = None

    def __post_init__(self) -> None:
        if self.policy_failure is not None and self.policy_failure not in _FAILURES:
            raise ValueError("policy_failure is invalid")
        if self.transitions and self.transitions[-1].step.done and self.policy_failure is not None:
            raise ValueError("a terminated Episode cannot also contain a Policy failure")

    @property
    def total_reward(self) -> float:
        return sum(transition.step.reward for transition in self.transitions)

    @property
    def steps(self) -> int:
        return len(self.transitions)


@dataclass(frozen=True, slots=True)
class Artifact:
    name: str
    media_type: str
    content: bytes = field(repr=False)
    retention: str = "permanent"

    def __post_init__(self) -> None:
        parts = self.name.split("/")
        if self.name.startswith("/") or "\\" in self.name or any(part in ("", ".", "..") for part in parts):
            raise ValueError("artifact name must be a relative POSIX path")
        if self.retention not in ("permanent", "bulk"):
            raise ValueError("artifact retention must be 'permanent' or 'bulk'")


@dataclass(frozen=True, slots=True)
class Feedback:
    score: float
    content: PolicyValue = None
    artifacts: tuple[Artifact, ...] = ()


@dataclass(frozen=True, slots=True)
class BenchmarkSpec:
    id: str
    description: str
    observation_space: PolicyValue
    action_space: PolicyValue
    metadata: Mapping[str, PolicyValue]
    max_episode_steps: int
    primary_metric: str
    score_direction: str
    environment_parameters: Mapping[str, PolicyValue] = field(default_factory=dict)


Environment = Any
Benchmark = Any
