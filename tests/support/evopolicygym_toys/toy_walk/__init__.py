"""A small EvoPolicyGym-style Benchmark package for the adapter's tests: a walk along a line to a goal.

Written against EvoPolicyGym 0.3's authoring interface: a Benchmark class
constructed with no argument or with `ToyWalkConfig(profile=...)`, profiles in
`TOY_WALK_PROFILES`. Its Episodes carry scenarios with tuples, unsigned 64-bit
integers and a TensorValue; observations and per-step metrics carry frames as
TensorValue; action 9 is refused with InvalidAction from step; Feedback has
path-named artifacts with media types and bulk retention.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from evopolicygym.authoring import Artifact, BenchmarkSpec, EpisodeRecord, EpisodeSpec, Feedback, InvalidAction, Step
from evopolicygym.policy import TensorValue

TOY_WALK_PROFILES = ("short", "long")
_LENGTHS = {"short": 3, "long": 6}
FAILURE_RETURN = -5.0


@dataclass(frozen=True, slots=True)
class ToyWalkConfig:
    profile: str = "short"

    def __post_init__(self) -> None:
        if self.profile not in _LENGTHS:
            raise ValueError(f"profile must be one of {TOY_WALK_PROFILES}")


def frame(position: int) -> TensorValue:
    return TensorValue(dtype="uint8", shape=(2, 2, 3), data=bytes([position % 256]) * 12)


class ToyWalkEnvironment:
    def __init__(self, episode: EpisodeSpec, goal: int, horizon: int) -> None:
        self.episode = episode
        self.goal = goal
        self.horizon = horizon
        self.position = 0
        self.steps = 0
        self.closed = False

    def observation(self) -> dict[str, object]:
        return {"position": (self.position, self.goal), "frame": frame(self.position)}

    def reset(self) -> dict[str, object]:
        return self.observation()

    def step(self, action: object) -> Step:
        if type(action) is not int or action not in (0, 1):
            raise InvalidAction()
        self.position += action
        self.steps += 1
        terminated = self.position >= self.goal
        truncated = not terminated and self.steps >= self.horizon
        metrics = {"frame": frame(self.position), "step": self.steps, "seed": self.episode.environment_seed}
        return Step(observation=self.observation(), reward=1.0 if action else -0.5, terminated=terminated, truncated=truncated,
                    metrics=metrics)

    def close(self) -> None:
        self.closed = True


class ToyWalkBenchmark:
    """Walk to the goal: action 1 steps forward (+1), action 0 stays (-0.5)."""

    def __init__(self, config: ToyWalkConfig | None = None) -> None:
        self.config = config or ToyWalkConfig()
        length = _LENGTHS[self.config.profile]
        self._spec = BenchmarkSpec(
            id=f"toy/walk-{self.config.profile}/v1",
            description="Walk along a line to the goal.",
            observation_space={"type": "dict", "position": ("int", "int"), "frame": {"dtype": "uint8", "shape": [2, 2, 3]}},
            action_space={"type": "discrete", "values": [0, 1]},
            metadata={"failure_return": FAILURE_RETURN, "provider": "tests"},
            max_episode_steps=2 * length,
            primary_metric="mean_return",
            score_direction="maximize",
            environment_parameters={"length": length, "profile": self.config.profile},
        )

    @property
    def spec(self) -> BenchmarkSpec:
        return self._spec

    def episodes(self, split: str, *, seed: int, count: int) -> tuple[EpisodeSpec, ...]:
        if split not in ("train", "validation", "test"):
            raise ValueError("split must be 'train', 'validation', or 'test'")
        offset = {"train": 0, "validation": 1000, "test": 2000}[split]
        length = _LENGTHS[self.config.profile]
        return tuple(
            EpisodeSpec(environment_seed=(2**64 - 1 - seed - offset - index) % 2**64,
                        scenario={"goal": (length, [index]), "tag": 2**63 + index, "tile": frame(index)})
            for index in range(count)
        )

    def make_environment(self, episode: EpisodeSpec) -> ToyWalkEnvironment:
        goal = episode.scenario["goal"][0]
        return ToyWalkEnvironment(episode, goal, self._spec.max_episode_steps)

    def feedback(self, episodes: tuple[EpisodeRecord, ...]) -> Feedback:
        returns = [r.total_reward if r.policy_failure is None else FAILURE_RETURN for r in episodes]
        rows = [
            {
                "steps": r.steps,
                "failure": r.policy_failure,
                "policy_seed": r.policy_seed,
                "environment_seed": r.episode.environment_seed,
                "scenario": r.episode.scenario,
                "actions": [t.action for t in r.transitions],
                "metric_steps": [t.step.metrics["step"] for t in r.transitions],
                "frames": [t.step.metrics["frame"] for t in r.transitions],
                "initial_observation": r.initial_observation,
                "last": (r.transitions[-1].step.terminated, r.transitions[-1].step.truncated) if r.transitions else None,
            }
            for r in episodes
        ]
        trace = "".join(json.dumps({"episode": i, "steps": r.steps}) + "\n" for i, r in enumerate(episodes)).encode()
        artifacts = (
            Artifact(name="trace.jsonl", media_type="application/x-ndjson", content=trace),
            *(Artifact(name=f"episode-{i:03d}/replay.gif", media_type="image/gif", content=b"GIF89a" + bytes([i]), retention="bulk")
              for i in range(len(episodes))),
        )
        return Feedback(score=sum(returns) / len(returns), content={"episodes": rows, "mean_return": sum(returns) / len(returns)},
                        artifacts=artifacts)


__all__ = ["TOY_WALK_PROFILES", "ToyWalkBenchmark", "ToyWalkConfig"]
