"""Evaluate one Program on planned Episodes through any EpisodeSandbox."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from orchestrator.kernel.outcomes import EpisodeOutcome
from orchestrator.kernel.ports import BenchmarkInfo, EpisodeSandbox, EvaluationFeedback
from orchestrator.kernel.program import Program


@dataclass(frozen=True, slots=True, kw_only=True)
class Evaluation:
    benchmark: BenchmarkInfo
    program: Program
    split: str
    seed: int
    feedback: EvaluationFeedback


def evaluate_program(
    sandbox: EpisodeSandbox,
    program: Program,
    *,
    split: str,
    seed: int,
    episodes: int,
    on_episode: Callable[[EpisodeOutcome], None] = lambda outcome: None,
) -> Evaluation:
    """Run program on `episodes` Episodes of split, each in a fresh runtime; return the Feedback.

    Policy failures are part of the result; infrastructure errors propagate.
    """
    if episodes < 1:
        raise ValueError("episodes must be at least 1")
    benchmark = sandbox.describe()
    outcomes = []
    for planned in sandbox.plan(split, seed, episodes):
        outcome = sandbox.run_episode(planned, program)
        outcomes.append(outcome)
        on_episode(outcome)
    return Evaluation(benchmark=benchmark, program=program, split=split, seed=seed, feedback=sandbox.feedback(outcomes))
