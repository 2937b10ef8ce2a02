"""Evaluate one Program on planned Episodes through any EpisodeSandbox, and the reproduction mode of a direct
evaluation: the Episodes and policy seeds EvoPolicyGym 0.3's own `evaluate` would use for the same seed, split and
count, so that per-Episode returns can be compared with its results one to one (never used by a Run, whose Episodes
stay secret)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Callable, Sequence

from orchestrator.kernel.outcomes import EpisodeOutcome
from orchestrator.kernel.ports import BenchmarkInfo, EpisodeJob, EpisodeSandbox, EvaluationFeedback, PlannedEpisode
from orchestrator.kernel.program import Program

# The domain EvoPolicyGym 0.3's kernel hashes a policy seed under (its documented derivation; see reproduction_policy_seed).
REPRODUCTION_SEED_DOMAIN = b"evopolicygym/policy-seed/v1\0"
MAX_SEED = 2**64 - 1


def reproduction_policy_seed(seed: int, position: int) -> int:
    """The policy seed EvoPolicyGym 0.3's evaluate gives the Episode at position (0-based, in plan order) under the
    master seed: the first 8 bytes, big-endian, of SHA-256 over the domain, then the seed and the position each as
    8 bytes big-endian. Raises ValueError for a seed or position outside 0..2**64-1."""
    if not 0 <= seed <= MAX_SEED or not 0 <= position <= MAX_SEED:
        raise ValueError("the seed and the Episode's position must be unsigned 64-bit integers")
    digest = hashlib.sha256(REPRODUCTION_SEED_DOMAIN + seed.to_bytes(8, "big") + position.to_bytes(8, "big")).digest()
    return int.from_bytes(digest[:8], "big")


def reproduction_plan(episodes: Sequence[PlannedEpisode], seed: int) -> list[PlannedEpisode]:
    """episodes (the runner's plan for seed, in its order) with the policy seeds EvoPolicyGym 0.3's evaluate derives."""
    return [replace(episode, policy_seed=reproduction_policy_seed(seed, position)) for position, episode in enumerate(episodes)]


@dataclass(frozen=True, slots=True, kw_only=True)
class Evaluation:
    benchmark: BenchmarkInfo
    program: Program
    split: str
    seed: int
    feedback: EvaluationFeedback
    # Reproduction mode: the policy seeds, in plan order (empty otherwise).
    reproduction_seeds: tuple[int, ...] = ()


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
    reproduce: bool = False,
) -> Evaluation:
    """Run program on `episodes` Episodes of split, each in a fresh runtime; return the Feedback.

    The seed and split reach the runner's planning unchanged either way; with reproduce, each Episode's policy seed
    is EvoPolicyGym 0.3's (reproduction_plan) instead of ours. Policy failures are part of the result;
    infrastructure errors propagate. Raises ValueError for fewer than one Episode, or with reproduce for a seed
    outside 0..2**64-1.
    """
    if episodes < 1:
        raise ValueError("episodes must be at least 1")
    if reproduce and not 0 <= seed <= MAX_SEED:
        raise ValueError("the seed must be an unsigned 64-bit integer")
    benchmark = sandbox.describe()
    planned = sandbox.plan(split, seed, episodes)
    if reproduce:
        planned = reproduction_plan(planned, seed)
    (feedback,) = evaluate_programs(sandbox, [program], planned, on_episode)
    return Evaluation(benchmark=benchmark, program=program, split=split, seed=seed, feedback=feedback,
                      reproduction_seeds=tuple(e.policy_seed for e in planned) if reproduce else ())
