"""The environment runner's protobuf messages (epg.v1.runner) to and from kernel values: a Benchmark's description,
planned Episodes, an Episode's request and record, the Feedback request and answer.

What every sandbox backend does the same way with the runner's messages; the gRPC calls that carry them stay in
the backends, which differ only in where the runner and the policy run and how the Host reaches them.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from epg.v1 import runner_pb2
from epg_sdk.codes import RunnerOutcome
from epg_sdk.outcomes import ContainerExit, classify_episode
from epg_sdk.planning import policy_seed
from epg_sdk.protocol import values
from epg_sdk.protocol.codes import OUTCOMES, failure_to_proto
from epg_sdk.runtime.episode_loop import EpisodeLimits
from orchestrator.kernel.infrastructure import InfraErrorCode, InfrastructureError
from orchestrator.kernel.outcomes import ArtifactDetails, ArtifactRetention, EpisodeOutcome
from orchestrator.kernel.ports import BenchmarkInfo, EpisodeJob, EvaluationFeedback, PlannedEpisode

MiB = 1 << 20
# Evidence of one Episode the Host keeps: the runner's own bound (epg_sdk's EVIDENCE_LIMIT_BYTES, 256 MiB: a whole
# 10,000-step RGB Episode fits); a record with more is kept without it, as over the Feedback bound below.
MAX_EPISODE_EVIDENCE_BYTES = 256 * MiB
# Evidence of all the Episodes of one BuildFeedback call together: past it, the evidence of the last Episodes is left
# out (first come, first kept) and the Feedback says which (EvaluationFeedback.evidence_dropped).
MAX_FEEDBACK_EVIDENCE_BYTES = 1536 * MiB
# Evidence a batch's outcomes hold in memory together between their Episodes' ends and their Feedback (a Validation
# batch holds every candidate's): an Episode ending past it keeps none (`without_evidence`).
MAX_BATCH_EVIDENCE_BYTES = 4096 * MiB
# What a runner call may carry: a Feedback request at its evidence bound with room for the rest of its records, an
# Episode record at its evidence bound, a Feedback answer's artifacts (16 MiB each, bounded again when recorded).
MAX_RUNNER_MESSAGE_BYTES = MAX_FEEDBACK_EVIDENCE_BYTES + 64 * MiB
CHANNEL_OPTIONS: list[tuple[str, Any]] = [("grpc.max_send_message_length", MAX_RUNNER_MESSAGE_BYTES),
                                          ("grpc.max_receive_message_length", MAX_RUNNER_MESSAGE_BYTES)]
_RETENTIONS = {runner_pb2.ARTIFACT_RETENTION_PERMANENT: ArtifactRetention.PERMANENT,
               runner_pb2.ARTIFACT_RETENTION_BULK: ArtifactRetention.BULK}
_RETENTIONS_PROTO = {value: key for key, value in _RETENTIONS.items()}


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
        step_seconds=_positive(d.step_seconds),
        episode_seconds=_positive(d.episode_seconds),
        parameters_digest=d.parameters_digest or values.digest(d.parameters),
    )


def _positive(seconds: float) -> float:
    """seconds when a finite positive number, else 0 (the Host's defaults apply)."""
    return seconds if math.isfinite(seconds) and seconds > 0 else 0.0


def planned_episodes(response: Any, seed: int) -> list[PlannedEpisode]:
    """The Episodes of a PlanEpisodes answer, each with its policy seed."""
    return [PlannedEpisode(split=e.split, index=e.index, payload=e.payload, policy_seed=policy_seed(seed, e.split, e.index))
            for e in response.episodes]


def without_evidence(outcome: EpisodeOutcome) -> EpisodeOutcome:
    """outcome without its evidence, marked as having had some (its Feedback names it in evidence_dropped)."""
    return replace(outcome, evidence=b"", evidence_dropped=True)


def feedback_request(outcomes: list[EpisodeOutcome],
                     max_evidence_bytes: int = MAX_FEEDBACK_EVIDENCE_BYTES) -> tuple[runner_pb2.FeedbackRequest, tuple[int, ...]]:
    """The BuildFeedback request over finished Episodes, in their order (no hidden payload), each with its evidence,
    and the indices of the Episodes whose evidence was left out: those after the one that would take the evidence
    of the request past max_evidence_bytes (the earlier Episodes keep theirs whole), and those whose evidence alone is
    over MAX_EPISODE_EVIDENCE_BYTES, or whose evidence the Host did not keep (`without_evidence`)."""
    records, dropped, total, full = [], [], 0, False
    for outcome in outcomes:
        evidence = outcome.evidence
        if outcome.evidence_dropped:
            dropped.append(outcome.index)
        elif evidence:
            full = full or (len(evidence) <= MAX_EPISODE_EVIDENCE_BYTES and total + len(evidence) > max_evidence_bytes)
            if full or len(evidence) > MAX_EPISODE_EVIDENCE_BYTES:
                dropped.append(outcome.index)
                evidence = b""
            total += len(evidence)
        records.append(outcome_to_proto_record(outcome, evidence))
    return runner_pb2.FeedbackRequest(records=records), tuple(dropped)


def evaluation_feedback(response: Any, outcomes: list[EpisodeOutcome], evidence_dropped: tuple[int, ...] = ()) -> EvaluationFeedback:
    """The Feedback of a BuildFeedback answer on outcomes (evidence_dropped: what feedback_request left out). The
    outcomes it lists keep no evidence: nothing after the Feedback needs it.

    Raises InfrastructureError(ENVIRONMENT_ERROR) for a non-finite score: the Benchmark's code misbehaved, which
    is never the policy's failure (a Submission it ends is voided and refunded), and a NaN or an infinity must not
    reach the records, the ranking or the selection.
    """
    _finite(response.score, f"the Benchmark's feedback gave a non-finite score over {len(outcomes)} Episodes")
    return EvaluationFeedback(score=response.score, values=values.decode(response.values) or {},
                              artifacts={a.name: a.data for a in response.artifacts},
                              artifact_details=artifact_details(response.artifacts),
                              episodes=tuple(replace(o, evidence=b"") if o.evidence else o for o in outcomes),
                              evidence_dropped=evidence_dropped)


def artifact_details(artifacts: Any) -> dict[str, ArtifactDetails]:
    """The media type and retention of each protobuf Artifact, by name (an unknown retention is kept as permanent)."""
    return {a.name: ArtifactDetails(media_type=a.media_type, retention=_RETENTIONS.get(a.retention, ArtifactRetention.PERMANENT))
            for a in artifacts}


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
        artifact_details=artifact_details(record.artifacts),
        evidence=record.evidence,
    )


def outcome_to_proto_record(outcome: EpisodeOutcome, evidence: bytes | None = None) -> runner_pb2.EpisodeRecord:
    """The classified record the runner's BuildFeedback needs (no hidden payload), with evidence (the outcome's own
    when None)."""
    return runner_pb2.EpisodeRecord(
        episode=runner_pb2.EpisodeSpec(split=outcome.split, index=outcome.index),
        steps=outcome.steps,
        total_reward=outcome.reward,
        terminated=outcome.terminated,
        truncated=outcome.truncated,
        summary=values.encode(outcome.summary),
        failure=failure_to_proto(outcome.failure),
        artifacts=[_artifact_to_proto(name, data, outcome.artifact_details.get(name)) for name, data in sorted(outcome.artifacts.items())],
        evidence=outcome.evidence if evidence is None else evidence,
    )


def _artifact_to_proto(name: str, data: bytes, details: ArtifactDetails | None) -> runner_pb2.Artifact:
    details = details or ArtifactDetails()
    return runner_pb2.Artifact(name=name, data=data, media_type=details.media_type, retention=_RETENTIONS_PROTO[details.retention])
