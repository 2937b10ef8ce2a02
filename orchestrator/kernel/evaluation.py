"""Evaluate one Program on planned Episodes through any EpisodeSandbox."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from orchestrator.kernel.outcomes import EpisodeOutcome
from orchestrator.kernel.ports import BenchmarkInfo, EpisodeJob, EpisodeSandbox, EvaluationFeedback, PlannedEpisode
from orchestrator.kernel.program import Program


@dataclass(frozen=True, slots=True, kw_only=True)
class Evaluation:
    benchmark: BenchmarkInfo
    program: Program
    split: str
    seed: int
    feedback: EvaluationFeedback


def evaluate_programs(
    sandbox: EpisodeSandbox,
    programs: Sequence[Program],
    episodes: Sequence[PlannedEpisode],
    on_episode: Callable[[EpisodeOutcome], None] = lambda outcome: None,
) -> list[EvaluationFeedback]:
    """Evaluate every Program on the same Episodes in one batch (concurrently where the sandbox can).

    Returns one Feedback per Program, in order; each Feedback lists its
    Episodes in plan order whatever order they ran in.
    """
    jobs = [EpisodeJob(episode=episode, program=program) for program in programs for episode in episodes]
    outcomes = sandbox.run_episodes(jobs, on_episode)
    count = len(episodes)
    return [sandbox.feedback(outcomes[i * count:(i + 1) * count]) for i in range(len(programs))]


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
    (feedback,) = evaluate_programs(sandbox, [program], sandbox.plan(split, seed, episodes), on_episode)
    return Evaluation(benchmark=benchmark, program=program, split=split, seed=seed, feedback=feedback)
