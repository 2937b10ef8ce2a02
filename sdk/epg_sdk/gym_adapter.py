"""Wrap a gymnasium environment as a Benchmark in a few lines.

Only environment images import this module: it needs gymnasium.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Callable

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from epg_sdk.benchmark import (
    EPISODE_COLUMNS,
    Benchmark,
    BenchmarkSpec,
    Direction,
    Environment,
    EpisodeRecord,
    Feedback,
    InvalidAction,
    StepResult,
    episodes_csv,
    with_failure_summaries,
)


def describe_space(space: spaces.Space[Any]) -> dict[str, Any]:
    """Return the public description of a gymnasium space. Raises TypeError for an unsupported space.

    A space of strings is ``{"type": "text"}``; for gymnasium's Text it also
    carries ``min_length``, ``max_length`` and ``charset`` (its characters, sorted).
    """
    if isinstance(space, spaces.Discrete):
        return {"type": "discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, spaces.Box):
        return {
            "type": "box",
            "shape": list(space.shape),
            "dtype": space.dtype.name,
            "low": np.asarray(space.low),
            "high": np.asarray(space.high),
        }
    if isinstance(space, spaces.MultiDiscrete):
        return {"type": "multi_discrete", "nvec": np.asarray(space.nvec)}
    if isinstance(space, spaces.MultiBinary):
        return {"type": "multi_binary", "n": np.asarray(space.n).tolist()}
    if isinstance(space, spaces.Dict):
        return {"type": "dict", "spaces": {k: describe_space(s) for k, s in space.spaces.items()}}
    if isinstance(space, spaces.Tuple):
        return {"type": "tuple", "spaces": [describe_space(s) for s in space.spaces]}
    if isinstance(space, spaces.Text):
        return {"type": "text", "min_length": int(space.min_length), "max_length": int(space.max_length), "charset": space.characters}
    if _holds_text(space):
        # A text space of another kind (e.g. a space of mission strings): its values are str, nothing more is known.
        return {"type": "text"}
    raise TypeError(f"unsupported gymnasium space {space!r}")


def _holds_text(space: spaces.Space[Any]) -> bool:
    """True when space holds Python strings: gymnasium's Text, or any space declared with ``dtype=str``."""
    dtype = getattr(space, "dtype", None)
    return isinstance(dtype, np.dtype) and dtype.kind == "U"


def describe_environment(env_id: str) -> dict[str, Any]:
    """Return what gymnasium.make(env_id) says about itself, for generating a package around it.

    Keys: observation_space and action_space (describe_space), their gymnasium
    reprs (observation_repr, action_repr), max_episode_steps (None when
    unregistered), entry_point and doc (the environment class's docstring).
    Raises gymnasium's error for an unknown id and TypeError for an unsupported space.
    """
    env = gym.make(env_id, disable_env_checker=True)
    try:
        registered = gym.spec(env_id)
        return {
            "observation_space": describe_space(env.observation_space),
            "action_space": describe_space(env.action_space),
            "observation_repr": repr(env.observation_space),
            "action_repr": repr(env.action_space),
            "max_episode_steps": registered.max_episode_steps,
            "entry_point": str(registered.entry_point),
            "doc": type(env.unwrapped).__doc__ or "",
        }
    finally:
        env.close()


def coerce_action(space: spaces.Space[Any], action: Any) -> Any:
    """Return action converted to what space holds. Raises InvalidAction when it does not fit."""
    if type(action) is int and type(space) is spaces.Discrete:
        if space.start <= action < space.start + space.n:
            return action  # the common case, checked without NumPy
        raise InvalidAction(f"action {action} is outside [{space.start}, {space.start + space.n})")
    value: Any  # what the space holds: a NumPy scalar or array, a str
    try:
        if isinstance(space, spaces.Discrete):
            array = np.asarray(action)
            if array.size != 1 or not (np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.bool_)):
                if array.size == 1 and np.issubdtype(array.dtype, np.floating) and float(array) == int(array):
                    array = array.astype(np.int64)
                else:
                    raise InvalidAction(f"expected one integer in [{space.start}, {space.start + space.n}), got {action!r}")
            value = np.int64(array.reshape(()))
        elif isinstance(space, spaces.Box):
            value = np.asarray(action, dtype=space.dtype)
            if value.shape != space.shape and value.size == 1 == int(np.prod(space.shape)):
                value = value.reshape(space.shape)  # a bare number for a one-element space
            if value.shape != space.shape:
                raise InvalidAction(f"expected an array of shape {space.shape}, got shape {np.shape(action)}")
            if not np.isfinite(value).all():
                raise InvalidAction("action contains NaN or infinity")
            # What Box.contains checks beyond dtype and shape (both ensured above), at a third of its cost per step.
            if (value < space.low).any() or (value > space.high).any():
                raise InvalidAction(f"action {_short(action)} is outside the action space {space}")
            return value
        elif isinstance(space, spaces.Dict):
            if not isinstance(action, dict) or set(action) != set(space.spaces):
                raise InvalidAction(f"expected a dict with keys {sorted(space.spaces)}")
            return {k: coerce_action(s, action[k]) for k, s in space.spaces.items()}
        elif isinstance(space, spaces.Tuple):
            if not isinstance(action, (list, tuple)) or len(action) != len(space.spaces):
                raise InvalidAction(f"expected a sequence of {len(space.spaces)} actions")
            return tuple(coerce_action(s, a) for s, a in zip(space.spaces, action, strict=True))
        elif _holds_text(space):
            if not isinstance(action, str):
                raise InvalidAction(f"expected a str, got {type(action).__name__}")
            value = str(action)  # a str subclass (np.str_) becomes a plain str
        else:
            value = np.asarray(action, dtype=space.dtype)
    except (TypeError, ValueError, OverflowError) as exc:
        raise InvalidAction(f"action {action!r} cannot be read: {exc}") from exc
    if not space.contains(value):
        raise InvalidAction(f"action {_short(action)} is outside the action space {space}")
    return value


def _short(action: Any, limit: int = 120) -> str:
    text = repr(action)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def make_unwrapped(env_id: str, make_kwargs: Mapping[str, Any] | None = None) -> gym.Env:
    """Return gymnasium.make(env_id, **make_kwargs) without its wrappers (no time limit, no checker), as a
    GymnasiumBenchmark builds each Episode's environment. Raises gymnasium's error for an unknown id."""
    return gym.make(env_id, disable_env_checker=True, **(make_kwargs or {})).unwrapped


@contextmanager
def probe_environment(env_id: str, make_kwargs: Mapping[str, Any] | None = None) -> Iterator[gym.Env]:
    """Yield make_unwrapped(env_id, make_kwargs), to read what a Benchmark publishes of it (for example
    simulator constants for BenchmarkSpec.parameters); close it on leaving."""
    env = make_unwrapped(env_id, make_kwargs)
    try:
        yield env
    finally:
        env.close()


class GymnasiumEnvironment:
    """One gymnasium environment instance seeded for one Episode."""

    def __init__(self, env: gym.Env, seed: int) -> None:
        self._env = env
        self._seed = seed

    def reset(self) -> Any:
        observation, _info = self._env.reset(seed=self._seed)
        return observation

    def step(self, action: Any) -> StepResult:
        observation, reward, terminated, truncated, _info = self._env.step(action)
        return StepResult(
            observation=observation,
            reward=float(reward),
            terminated=bool(terminated),
            truncated=bool(truncated),
        )

    def summary(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        self._env.close()


class GymnasiumBenchmark(Benchmark):
    """A Benchmark over a registered gymnasium environment id.

    The environment is built unwrapped (no time limit, no checker wrappers):
    the runner enforces the horizon itself, which keeps a step cheap.
    failure_summary and summary_columns extend the default Feedback (see feedback()).
    """

    def __init__(
        self,
        *,
        env_id: str,
        description: str,
        horizon: int,
        failure_return: float,
        benchmark_id: str | None = None,
        parameters: dict[str, Any] | None = None,
        make_kwargs: dict[str, Any] | None = None,
        direction: Direction = "maximize",
        readme: str = "",
        public_attributes: tuple[str, ...] = (),
        environment_factory: Callable[[gym.Env, int], Environment] = GymnasiumEnvironment,
        failure_summary: Mapping[str, Any] | None = None,
        summary_columns: tuple[str, ...] = (),
    ) -> None:
        self._env_id = env_id
        self._make_kwargs = dict(make_kwargs or {})
        self._factory = environment_factory
        self._failure_summary = None if failure_summary is None else dict(failure_summary)
        self._summary_columns = summary_columns
        probe = self._make()
        self._action_space = probe.action_space
        # Simulator constants (e.g. CartPole's gravity) published as public parameters.
        published = {name: float(getattr(probe, name)) for name in public_attributes}
        self._spec = BenchmarkSpec(
            id=benchmark_id or env_id,
            description=description,
            observation_space=describe_space(probe.observation_space),
            action_space=describe_space(probe.action_space),
            horizon=horizon,
            failure_return=failure_return,
            direction=direction,
            parameters={**published, **(parameters or {})},
            readme=readme,
        )
        probe.close()

    def _make(self) -> gym.Env:
        return make_unwrapped(self._env_id, self._make_kwargs)

    @property
    def spec(self) -> BenchmarkSpec:
        return self._spec

    def make_environment(self, payload: bytes) -> Environment:
        seed = int(json.loads(payload)["seed"])
        return self._factory(self._make(), seed)

    def validate_action(self, action: Any) -> Any:
        return coerce_action(self._action_space, action)

    def feedback(self, records: list[EpisodeRecord]) -> Feedback:
        """The SDK's default Feedback. With failure_summary, each failed Episode's summary in the per-Episode
        table says it too (for example ``{"end": "policy_failure"}``); with summary_columns, episodes.csv
        carries those values of each Episode's summary after EPISODE_COLUMNS."""
        base = super().feedback(records)
        if self._failure_summary is None and not self._summary_columns:
            return base
        episodes = with_failure_summaries(base.values["episodes"], self._failure_summary or {})
        artifacts = {**base.artifacts, "episodes.csv": episodes_csv(episodes, EPISODE_COLUMNS, self._summary_columns)}
        return Feedback(score=base.score, values={**base.values, "episodes": episodes}, artifacts=artifacts)
