"""evaluate(): an unisolated, in-process evaluation of a Program on a Benchmark, for package tests and quick local checks.

It plans `episodes` Episodes of `split` with `seed`, derives each Episode's policy seed from the seed and the Episode's
index, runs them one after the other in this process and returns the Benchmark's Feedback with per-Episode summaries.
Nothing is isolated and no limit is enforced: use `epg-orchestrate evaluate` to evaluate in the sandbox.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .authoring._episodes import derive_policy_seed, program_source, run_episode, summarize
from .authoring.benchmark import Benchmark, BenchmarkSpec
from .authoring.environment import EpisodeSpec
from .errors import EvaluationError
from .execution import ProcessExecution
from .policy import check_u64
from .program import Program
from .results import EvaluationResult, Feedback


@dataclass(frozen=True, slots=True, kw_only=True)
class EvaluationConfig:
    """What to evaluate on: split, number of Episodes, plan seed and each Episode's time limit (seconds).

    Raises ValueError for an empty split, a non-positive episodes, a seed outside u64 or a non-positive or non-finite timeout.
    """

    split: str = "validation"
    episodes: int = 1
    seed: int = 0
    episode_timeout_seconds: float = 30.0

    def __post_init__(self) -> None:
        if type(self.split) is not str or not self.split:
            raise ValueError("split must be non-empty text")
        if type(self.episodes) is not int or self.episodes < 1:
            raise ValueError("episodes must be a positive integer")
        check_u64(self.seed, "seed")
        timeout = self.episode_timeout_seconds
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not math.isfinite(timeout) or timeout <= 0:
            raise ValueError("episode_timeout_seconds must be positive and finite")
        object.__setattr__(self, "episode_timeout_seconds", float(timeout))


def evaluate(program: Program, benchmark: Benchmark, *, execution: ProcessExecution, config: EvaluationConfig | None = None) -> EvaluationResult:
    """Evaluate program on benchmark in this process, unisolated, and return the result.

    Raises TypeError for arguments of the wrong type (execution must be ProcessExecution.unsafe()), and EvaluationError
    when the Benchmark fails: its spec or plan is invalid, an Environment fails (see run_episode), or feedback() fails
    or returns something other than Feedback. The Policy's failures are Episode outcomes, not exceptions.
    """
    if type(program) is not Program:
        raise TypeError("program must be a Program")
    if not isinstance(benchmark, Benchmark):
        raise TypeError("benchmark must implement the Benchmark protocol")
    if type(execution) is not ProcessExecution:
        raise TypeError("execution must be ProcessExecution.unsafe()")
    chosen = EvaluationConfig() if config is None else config
    if type(chosen) is not EvaluationConfig:
        raise TypeError("config must be an EvaluationConfig or None")
    spec, plan = _plan(benchmark, chosen)
    policies = program_source(program)
    records = tuple(
        run_episode(
            benchmark.make_environment,
            spec,
            episode,
            policies,
            policy_seed=derive_policy_seed(chosen.seed, index),
            timeout_seconds=chosen.episode_timeout_seconds,
        )
        for index, episode in enumerate(plan)
    )
    try:
        feedback = benchmark.feedback(records)
    except Exception as error:
        raise EvaluationError("the Benchmark could not build Feedback") from error
    if type(feedback) is not Feedback:
        raise EvaluationError("the Benchmark's feedback() returned something that is not Feedback")
    return EvaluationResult(
        benchmark_id=spec.id,
        environment_digest=spec.environment_digest,
        program_digest=program.digest,
        feedback=feedback,
        episodes=tuple(summarize(record) for record in records),
    )


def _plan(benchmark: Benchmark, config: EvaluationConfig) -> tuple[BenchmarkSpec, tuple[EpisodeSpec, ...]]:
    try:
        spec = benchmark.spec
        plan = tuple(benchmark.episodes(config.split, seed=config.seed, count=config.episodes))
    except Exception as error:
        raise EvaluationError("the Benchmark could not plan Episodes") from error
    if type(spec) is not BenchmarkSpec:
        raise EvaluationError("the Benchmark's spec is not a BenchmarkSpec")
    if len(plan) != config.episodes or any(type(episode) is not EpisodeSpec for episode in plan):
        raise EvaluationError(f"the Benchmark did not plan exactly {config.episodes} EpisodeSpecs")
    return spec, plan


__all__ = ["EvaluationConfig", "EvaluationResult", "derive_policy_seed", "evaluate"]
