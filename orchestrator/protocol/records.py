"""The classified record of a published Episode outcome, in the runner's protobuf form."""

from __future__ import annotations

from epg.v1 import runner_pb2
from epg_sdk.protocol import values
from epg_sdk.protocol.codes import failure_to_proto
from orchestrator.kernel.outcomes import EpisodeOutcome


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
