"""Per-Episode evidence: kept by the Host from RunEpisode to the Submission's BuildFeedback call (over a real gRPC
channel to an in-process runner double, larger than gRPC's default 4 MiB), bounded per call, never published."""

from __future__ import annotations

import json
import tempfile
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from epg.v1 import runner_pb2, runner_pb2_grpc
from epg_sdk.codes import RunnerOutcome
from epg_sdk.protocol import values
from orchestrator.backends.sandbox import DockerSandbox
from orchestrator.backends.settings import SandboxImages
from orchestrator.kernel.ports import EpisodeJob, PlannedEpisode
from orchestrator.protocol.runner_messages import (
    MAX_RUNNER_MESSAGE_BYTES,
    episode_outcome,
    feedback_request,
)
from orchestrator.records.feedback import feedback_json
from orchestrator.records.models import FeedbackDocument

MiB = 1 << 20


class RunnerDouble(runner_pb2_grpc.EnvironmentRunnerServicer):
    """Answers RunEpisode with a record carrying evidence; keeps what BuildFeedback was sent."""

    def __init__(self, evidence: dict[int, bytes]) -> None:
        self.evidence = evidence
        self.feedback_records: list[runner_pb2.EpisodeRecord] = []

    def RunEpisode(self, request, context):
        return runner_pb2.EpisodeRecord(episode=request.episode, outcome=runner_pb2.RUNNER_OUTCOME_COMPLETED, steps=3,
                                        total_reward=1.0, summary=values.encode({}), evidence=self.evidence[request.episode.index])

    def BuildFeedback(self, request, context):
        self.feedback_records = list(request.records)
        return runner_pb2.FeedbackResponse(score=float(len(request.records)), values=values.encode({"seen": len(request.records)}))


@pytest.fixture
def runner():
    """A runner double served on a Unix socket as the environment image serves one (its limits raised to match)."""
    evidence = {0: bytes(range(256)) * (24 * 1024), 1: b"TRAJECTORY" * (600 * 1024)}  # 6 MiB each: over gRPC's 4 MiB default
    double = RunnerDouble(evidence)
    with tempfile.TemporaryDirectory(prefix="epg-ev-") as directory:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2),
                             options=[("grpc.max_receive_message_length", MAX_RUNNER_MESSAGE_BYTES),
                                      ("grpc.max_send_message_length", MAX_RUNNER_MESSAGE_BYTES)])
        runner_pb2_grpc.add_EnvironmentRunnerServicer_to_server(double, server)
        socket = Path(directory) / "runner.sock"
        server.add_insecure_port(f"unix:{socket}")
        server.start()
        try:
            yield double, socket
        finally:
            server.stop(None)


def sandbox_on(socket: Path) -> DockerSandbox:
    """A DockerSandbox whose first lane talks to the runner at socket, as _start_runner connects it (no engine)."""
    from orchestrator.backends.lanes import runner_channel

    sandbox = DockerSandbox(engine=None, images=SandboxImages(environment="e", policy_runtime="p", benchmark_entry="x"))
    lane = sandbox._lanes[0]
    lane.channel = runner_channel(f"unix:{socket}")
    lane.stub = runner_pb2_grpc.EnvironmentRunnerStub(lane.channel)
    return sandbox


def run_episode(sandbox: DockerSandbox, index: int):
    job = EpisodeJob(episode=PlannedEpisode(split="train", index=index, payload=b"{}", policy_seed=1), program=None)
    record = sandbox._call(sandbox._lanes[0], "RunEpisode", runner_pb2.RunEpisodeRequest(
        episode=runner_pb2.EpisodeSpec(split="train", index=index)), 30)
    return episode_outcome(job, record, RunnerOutcome.COMPLETED, None, b"")


def test_each_episodes_evidence_reaches_build_feedback_whole_and_is_never_published(runner):
    double, socket = runner
    sandbox = sandbox_on(socket)
    try:
        outcomes = [run_episode(sandbox, 0), run_episode(sandbox, 1)]
        feedback = sandbox.feedback(outcomes)
    finally:
        sandbox._lanes[0].channel.close()
    assert [r.evidence for r in double.feedback_records] == [double.evidence[0], double.evidence[1]]
    assert feedback.score == 2.0 and feedback.evidence_dropped == ()
    assert all(not episode.evidence for episode in feedback.episodes)  # nothing after the Feedback keeps it
    document = feedback_json(feedback, "sha256:" + "0" * 64)
    text = json.dumps(document)
    assert "evidence" not in text and "TRAJECTORY" not in text
    assert all("evidence" not in episode.to_json() for episode in outcomes)


def test_evidence_past_the_feedback_bound_is_dropped_from_the_last_episodes_and_the_record_says_so(runner):
    double, socket = runner
    sandbox = sandbox_on(socket)
    try:
        outcomes = [run_episode(sandbox, 0), run_episode(sandbox, 1)]
    finally:
        sandbox._lanes[0].channel.close()
    request, dropped = feedback_request(outcomes, max_evidence_bytes=7 * MiB)
    assert [r.evidence for r in request.records] == [double.evidence[0], b""] and dropped == (1,)
    assert request.ByteSize() < 7 * MiB + 1024
    from orchestrator.protocol.runner_messages import evaluation_feedback

    feedback = evaluation_feedback(runner_pb2.FeedbackResponse(score=1.0), outcomes, dropped)
    document = FeedbackDocument.model_validate(feedback_json(feedback, "sha256:" + "0" * 64))
    assert document.evidence_dropped == [1]


def test_one_episodes_evidence_over_its_own_bound_is_dropped_alone():
    from dataclasses import replace

    from orchestrator.kernel.outcomes import EpisodeOutcome
    from orchestrator.protocol import runner_messages

    base = EpisodeOutcome(index=0, split="train", status=runner_messages.classify_episode(RunnerOutcome.COMPLETED, "", None).status,
                          failure=None, reason="", steps=1, reward=0.0, terminated=True, truncated=False, policy_seconds=0.0,
                          environment_seconds=0.0)
    huge = replace(base, index=1, evidence=b"x" * (runner_messages.MAX_EPISODE_EVIDENCE_BYTES + 1))
    small = [replace(base, index=i, evidence=b"ok") for i in (0, 2)]
    request, dropped = feedback_request([small[0], huge, small[1]])
    assert [r.evidence for r in request.records] == [b"ok", b"", b"ok"] and dropped == (1,)


def test_a_batch_keeps_at_most_its_bound_of_evidence_in_memory_and_the_feedback_names_the_rest(monkeypatch):
    from dataclasses import replace

    from orchestrator.backends import lanes
    from orchestrator.kernel.outcomes import EpisodeOutcome
    from orchestrator.protocol import runner_messages

    class Pool:
        def begin_batch(self, size):
            pass

        def end_batch(self):
            pass

    monkeypatch.setattr(lanes, "MAX_BATCH_EVIDENCE_BYTES", 250)
    base = EpisodeOutcome(index=0, split="train", status=runner_messages.classify_episode(RunnerOutcome.COMPLETED, "", None).status,
                          failure=None, reason="", steps=1, reward=0.0, terminated=True, truncated=False, policy_seconds=0.0,
                          environment_seconds=0.0)
    jobs = [EpisodeJob(episode=PlannedEpisode(split="train", index=i, payload=b"", policy_seed=i), program=None) for i in range(4)]
    outcomes = lanes.run_over_lanes(Pool(), jobs, 1, lambda lane, job: replace(base, index=job.episode.index, evidence=b"e" * 100),
                                    None, "t")
    assert [len(o.evidence) for o in outcomes] == [100, 100, 0, 0]
    assert [o.evidence_dropped for o in outcomes] == [False, False, True, True]
    request, dropped = feedback_request(outcomes)
    assert dropped == (2, 3) and [len(r.evidence) for r in request.records] == [100, 100, 0, 0]
