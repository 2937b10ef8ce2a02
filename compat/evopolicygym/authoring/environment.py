"""The Environment side of a Benchmark: EpisodeSpec, Step, Transition, EpisodeRecord, InvalidAction and the Environment protocol."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ..policy import PolicyValue, check_u64, copy_policy_value
from ..results import POLICY_FAILURE_CODES, PolicyFailureCode, finite_number


class InvalidAction(Exception):
    """Raised by Environment.step when the Policy's Action lies outside the action domain; the Episode ends as the Policy's invalid_action.

    It carries no message: nothing of the Environment's state reaches the Policy through it.
    """

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__()


@dataclass(frozen=True, slots=True)
class EpisodeSpec:
    """The hidden identity of one Episode: an unsigned 64-bit environment seed and an optional scenario value.

    Raises ValueError for a seed outside [0, 2**64 - 1] (or not an exact int), and what copy_policy_value raises for a scenario.
    """

    environment_seed: int
    scenario: PolicyValue = None

    def __post_init__(self) -> None:
        check_u64(self.environment_seed, "environment_seed")
        object.__setattr__(self, "scenario", copy_policy_value(self.scenario))


@dataclass(frozen=True, slots=True)
class Step:
    """One Environment response: the next observation, a finite reward, whether the Episode terminated or was truncated, and metrics.

    reward becomes a float; observation and metrics detached PolicyValue copies (metrics may carry frames as TensorValues).
    Raises ValueError for a reward that is not a finite number and TypeError when terminated or truncated is not a bool.
    """

    observation: PolicyValue
    reward: float
    terminated: bool
    truncated: bool = False
    metrics: PolicyValue = None

    def __post_init__(self) -> None:
        reward = finite_number(self.reward, "reward")
        if type(self.terminated) is not bool or type(self.truncated) is not bool:
            raise TypeError("terminated and truncated must be exact bool values")
        object.__setattr__(self, "reward", reward)
        object.__setattr__(self, "observation", copy_policy_value(self.observation))
        object.__setattr__(self, "metrics", copy_policy_value(self.metrics))

    @property
    def done(self) -> bool:
        """True when the Episode terminated or was truncated."""
        return self.terminated or self.truncated


@dataclass(frozen=True, slots=True)
class Transition:
    """The Policy's Action, as it sent it, and the Step the Environment answered with. Raises TypeError when step is not a Step."""

    action: PolicyValue
    step: Step

    def __post_init__(self) -> None:
        if type(self.step) is not Step:
            raise TypeError("step must be Step")
        object.__setattr__(self, "action", copy_policy_value(self.action))


@dataclass(frozen=True, slots=True)
class EpisodeRecord:
    """The whole trajectory of one Episode, as Benchmark.feedback sees it.

    Holds the EpisodeSpec, the policy seed, the first observation, every Transition and the Policy's failure code if it
    failed. Raises TypeError for an episode that is not an EpisodeSpec or a transition that is not a Transition, and
    ValueError for a policy seed outside u64, a Transition after the one that ended the Episode, an unknown failure code,
    or a failure recorded on an Episode whose last Step ended it.
    """

    episode: EpisodeSpec
    policy_seed: int
    initial_observation: PolicyValue
    transitions: tuple[Transition, ...]
    policy_failure: PolicyFailureCode | None = None

    def __post_init__(self) -> None:
        if type(self.episode) is not EpisodeSpec:
            raise TypeError("episode must be EpisodeSpec")
        check_u64(self.policy_seed, "policy_seed")
        transitions = tuple(self.transitions)
        for position, transition in enumerate(transitions):
            if type(transition) is not Transition:
                raise TypeError("transitions must contain Transition values")
            if transition.step.done and position != len(transitions) - 1:
                raise ValueError("an EpisodeRecord has no Transition after the one that ended the Episode")
        if self.policy_failure is not None:
            if self.policy_failure not in POLICY_FAILURE_CODES:
                raise ValueError(f"policy_failure must be None or one of {sorted(POLICY_FAILURE_CODES)}")
            if transitions and transitions[-1].step.done:
                raise ValueError("an Episode the Environment ended has no Policy failure")
        object.__setattr__(self, "initial_observation", copy_policy_value(self.initial_observation))
        object.__setattr__(self, "transitions", transitions)

    @property
    def total_reward(self) -> float:
        """The sum of the rewards of every Transition, in order (the int 0 when there is none, as EvoPolicyGym 0.3 gives)."""
        return sum(transition.step.reward for transition in self.transitions)

    @property
    def steps(self) -> int:
        """The number of Transitions."""
        return len(self.transitions)


@runtime_checkable
class Environment(Protocol):
    """One fresh Environment per Episode: reset once, step until a Step is done, close on every path."""

    def reset(self) -> PolicyValue:
        """Return the first observation."""
        ...

    def step(self, action: PolicyValue) -> Step:
        """Apply the Policy's Action; raise InvalidAction when it lies outside the action domain."""
        ...

    def close(self) -> None:
        """Release the Environment's resources; called once the Episode ends, whatever way it ends."""
        ...


__all__ = ["Environment", "EpisodeRecord", "EpisodeSpec", "InvalidAction", "Step", "Transition"]
