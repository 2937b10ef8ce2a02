"""What every sandbox backend does the same way with the environment runner's messages, and how a batch of
Episodes is spread over lanes: the Docker and the Kubernetes sandbox differ only in where the runner and the
policy run and how the Host reaches them.
"""

from __future__ import annotations

import math
import threading
from typing import Any, Callable, Sequence

from epg.v1 import runner_pb2
from epg_sdk.codes import RunnerOutcome
from epg_sdk.outcomes import ContainerExit, classify_episode
from epg_sdk.planning import policy_seed
from epg_sdk.protocol import values
from epg_sdk.protocol.codes import OUTCOMES
from epg_sdk.runtime.episode_loop import EpisodeLimits
from orchestrator.backends.pool import ContainerPool
from orchestrator.kernel.infrastructure import InfraErrorCode, InfrastructureError
from orchestrator.kernel.outcomes import EpisodeOutcome
from orchestrator.kernel.ports import BenchmarkInfo, EpisodeJob, EvaluationFeedback, PlannedEpisode
from orchestrator.protocol.records import outcome_to_proto_record


def benchmark_info(d: Any) -> BenchmarkInfo:
    """The Benchmark a runner's Describe answer describes.

    Raises InfrastructureError(ENVIRONMENT_ERROR) for a non-finite failure_return: every failed Episode scores it.
    """
    _finite(d.failure_return, f"the Benchmark {d.id!r} describes a non-finite failure_return")
    return BenchmarkInfo(
        id=d.id,
        description=d.description,
        observation_space=values.decode(d.observation_space),
        action_space=values.decode(d.action_space),
        horizon=d.horizon,
        primary_metric=d.primary_metric,
        direction="minimize" if d.direction == runner_pb2.METRIC_DIRECTION_MINIMIZE else "maximize",
        parameters=values.decode(d.parameters),
        failure_return=d.failure_return,
        readme=d.readme,
    )


def planned_episodes(response: Any, seed: int) -> list[PlannedEpisode]:
    """The Episodes of a PlanEpisodes answer, each with its policy seed."""
    return [PlannedEpisode(split=e.split, index=e.index, payload=e.payload, policy_seed=policy_seed(seed, e.split, e.index))
            for e in response.episodes]


def feedback_request(outcomes: list[EpisodeOutcome]) -> runner_pb2.FeedbackRequest:
    return runner_pb2.FeedbackRequest(records=[outcome_to_proto_record(o) for o in outcomes])


def evaluation_feedback(response: Any, outcomes: list[EpisodeOutcome]) -> EvaluationFeedback:
    """The Feedback of a BuildFeedback answer on outcomes.

    Raises InfrastructureError(ENVIRONMENT_ERROR) for a non-finite score: the Benchmark's code misbehaved, which
    is never the policy's failure (a Submission it ends is voided and refunded), and a NaN or an infinity must not
    reach the records, the ranking or the selection.
    """
    _finite(response.score, f"the Benchmark's feedback gave a non-finite score over {len(outcomes)} Episodes")
    return EvaluationFeedback(score=response.score, values=values.decode(response.values) or {},
                              artifacts={a.name: a.data for a in response.artifacts}, episodes=tuple(outcomes))


def episode_request(job: EpisodeJob, limits: EpisodeLimits, slot: str, program_dir: str) -> runner_pb2.RunEpisodeRequest:
    episode = job.episode
    return runner_pb2.RunEpisodeRequest(
        slot=slot,
        episode=runner_pb2.EpisodeSpec(split=episode.split, index=episode.index, payload=episode.payload),
        policy_seed=episode.policy_seed,
        limits=limits.to_proto(),
        program_dir=program_dir,
    )


def episode_budget_s(limits: EpisodeLimits) -> float:
    """How long the Host waits for a RunEpisode answer: the runner enforces the Episode's own deadlines."""
    return limits.startup_deadline_s * 2 + limits.episode_deadline_s + 60


def runner_outcome(job: EpisodeJob, record: Any) -> RunnerOutcome:
    """How the runner says the Episode ended.

    Raises InfrastructureError(ENVIRONMENT_ERROR), not the policy's fault, when the runner says the environment
    failed or when the Episode's return is not a finite number (the environment's rewards are its own).
    """
    outcome = OUTCOMES[record.outcome]
    episode = job.episode
    if outcome is RunnerOutcome.ENVIRONMENT_ERROR:
        raise InfrastructureError(
            InfraErrorCode.ENVIRONMENT_ERROR,
            f"the {episode.split} Episode {episode.index} failed inside the environment (not the policy's fault)",
            evidence=record.traceback,
        )
    _finite(record.total_reward, f"the environment gave the {episode.split} Episode {episode.index} a non-finite return")
    return outcome


def _finite(number: float, what: str) -> None:
    """Raises InfrastructureError(ENVIRONMENT_ERROR) saying what, and the number, when number is NaN or infinite."""
    if not math.isfinite(number):
        raise InfrastructureError(InfraErrorCode.ENVIRONMENT_ERROR, f"{what} ({number!r}; not the policy's fault)")


def episode_outcome(job: EpisodeJob, record: Any, outcome: RunnerOutcome, exit_status: ContainerExit | None,
                    tail: bytes) -> EpisodeOutcome:
    """The published outcome of an Episode from the runner's record and how the policy's container ended."""
    episode = job.episode
    verdict = classify_episode(outcome, record.message, exit_status)
    return EpisodeOutcome(
        index=episode.index,
        split=episode.split,
        status=verdict.status,
        failure=verdict.failure,
        reason=verdict.reason,
        steps=record.steps,
        reward=record.total_reward,
        terminated=record.terminated,
        truncated=record.truncated,
        policy_seconds=record.policy_seconds,
        environment_seconds=record.environment_seconds,
        loop_seconds=record.loop_seconds,
        output_tail=tail.decode("utf-8", "replace"),
        traceback=record.traceback,
        summary=values.decode(record.summary) or {},
        artifacts={a.name: a.data for a in record.artifacts},
    )


def run_over_lanes(
    pool: ContainerPool,
    jobs: Sequence[EpisodeJob],
    lanes: int,
    run_one: Callable[[int, EpisodeJob], EpisodeOutcome],
    on_episode: Callable[[EpisodeOutcome], None] | None,
    thread_prefix: str,
) -> list[EpisodeOutcome]:
    """Run the jobs, one thread per lane pulling from one queue; return one outcome per job, in job order (so Feedback
    is the same whatever the concurrency).

    Raises the first error a lane met, in run_one or in on_episode (the other lanes stop taking jobs), and
    InfrastructureError(RUNNER_FAILED) should a job end without an outcome anyway: a short list would pass for
    Feedback on fewer Episodes than were asked for.
    """
    results: list[EpisodeOutcome | None] = [None] * len(jobs)
    cursor = iter(range(len(jobs)))
    cursor_lock = threading.Lock()
    failure: list[BaseException] = []

    def lane_worker(lane: int) -> None:
        while not failure:
            with cursor_lock:
                index = next(cursor, None)
            if index is None:
                return
            try:
                outcome = run_one(lane, jobs[index])
                results[index] = outcome
                if on_episode is not None:
                    on_episode(outcome)
            except BaseException as exc:
                failure.append(exc)
                return

    pool.begin_batch(len(jobs))
    try:
        threads = [threading.Thread(target=lane_worker, args=(lane,), name=f"{thread_prefix}-{lane}")
                   for lane in range(max(1, min(lanes, len(jobs))))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        pool.end_batch()
    if failure:
        raise failure[0]
    outcomes = [outcome for outcome in results if isinstance(outcome, EpisodeOutcome)]
    if len(outcomes) != len(jobs):
        missing = [job.episode.index for job, outcome in zip(jobs, results, strict=True) if not isinstance(outcome, EpisodeOutcome)]
        raise InfrastructureError(InfraErrorCode.RUNNER_FAILED,
                                  f"{len(missing)} of {len(jobs)} Episodes ended without an outcome (indices {missing[:8]})")
    return outcomes
