"""The environment runner's protobuf messages (epg.v1.runner) to and from kernel values: a Benchmark's description,
planned Episodes, an Episode's request and record, the Feedback request and answer.

What every sandbox backend does the same way with the runner's messages; the gRPC calls that carry them stay in
the backends, which differ only in where the runner and the policy run and how the Host reaches them.
"""

from __future__ import annotations

import math
from typing import Any

from epg.v1 import runner_pb2
from epg_sdk.codes import RunnerOutcome
from epg_sdk.outcomes import ContainerExit, classify_episode
from epg_sdk.planning import policy_seed
from epg_sdk.protocol import values
from epg_sdk.protocol.codes import OUTCOMES, failure_to_proto
from epg_sdk.runtime.episode_loop import EpisodeLimits
from orchestrator.kernel.infrastructure import InfraErrorCode, InfrastructureError
from orchestrator.kernel.outcomes import EpisodeOutcome
from orchestrator.kernel.ports import BenchmarkInfo, EpisodeJob, EvaluationFeedback, PlannedEpisode


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
    """The BuildFeedback request over finished Episodes, in their order (no hidden payload)."""
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
    """The RunEpisode request of job in the runner's slot, with the Episode's deadlines and the Program's directory."""
    episode = job.episode
    return runner_pb2.RunEpisodeRequest(
        slot=slot,
        episode=runner_pb2.EpisodeSpec(split=episode.split, index=episode.index, payload=episode.payload),
        policy_seed=episode.policy_seed,
        limits=limits.to_proto(),
        program_dir=program_dir,
    )


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


def outcome_to_proto_record(outcome: EpisodeOutcome) -> runner_pb2.EpisodeRecord:
    """The classified record the runner's BuildFeedback needs (no hidden payload)."""
    return runner_pb2.EpisodeRecord(
        episode=runner_pb2.EpisodeSpec(split=outcome.split, index=outcome.index),
        steps=outcome.steps,
        total_reward=outcome.reward,
        terminated=outcome.terminated,
        truncated=outcome.truncated,
        summary=values.encode(outcome.summary),
        failure=failure_to_proto(outcome.failure),
        artifacts=[runner_pb2.Artifact(name=name, data=data) for name, data in sorted(outcome.artifacts.items())],
    )
