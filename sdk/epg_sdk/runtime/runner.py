"""The environment runner: serves one Benchmark to the Host over gRPC on a Unix socket.

Runs inside the environment image (trusted code: the Benchmark and its
simulator). For each Episode the Host first asks for a slot, which makes a
listening socket at EXCHANGE/<slot>/policy.sock; the Host then starts a policy
container with that slot directory mounted read-only, and calls RunEpisode.

Imports: the standard library, grpc, protobuf, NumPy, epg_sdk.protocol,
epg_sdk and the Benchmark's own package.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import sys
import threading
import traceback
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc

from epg.v1 import runner_pb2, runner_pb2_grpc
from epg_sdk.benchmark import Benchmark, as_artifact
from epg_sdk.protocol import values
from epg_sdk.protocol.framing import STEP_SPIN, FramedSocket
from epg_sdk.runtime.episode_loop import (
    RUNNER_RECEIVE_LIMIT_BYTES,
    RUNNER_SEND_LIMIT_BYTES,
    EpisodeLimits,
    artifact_name_problem,
    drive_episode,
    feedback_records,
)

SLOT_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
FEEDBACK_LIMIT_BYTES = 1024 * 1024
# All of one Feedback's artifacts together: far below RUNNER_SEND_LIMIT_BYTES, whatever the values take.
FEEDBACK_ARTIFACTS_LIMIT_BYTES = 512 * 1024 * 1024
_RETENTION = {"permanent": runner_pb2.ARTIFACT_RETENTION_PERMANENT, "bulk": runner_pb2.ARTIFACT_RETENTION_BULK}
SOCKET_NAME = "policy.sock"
RUNNER_SOCKET = "runner.sock"

def load_benchmark(entry: str) -> Benchmark:
    """Return the Benchmark entry names.

    "module:attribute" calls attribute (one of our factories, or an EvoPolicyGym Benchmark class);
    "module:Attribute?profile=NAME" constructs an EvoPolicyGym Benchmark class with its config's profile NAME
    (`epg_sdk.evopolicygym.discovery`). An object with their structural interface is wrapped in
    EvoPolicyGymBenchmark. Raises TypeError when the result is neither, EntryError for a malformed entry.
    """
    from epg_sdk.evopolicygym.discovery import load

    return load(entry)


def _encoder(spec: Any) -> Any:
    """The codec of a Benchmark's public values: exact values for policy/v2 Benchmarks, ours otherwise."""
    from epg_sdk.evopolicygym.exact import encoder_for

    return encoder_for(spec.program_abi)


def describe(benchmark: Benchmark) -> runner_pb2.BenchmarkDescription:
    spec = benchmark.spec
    encode = _encoder(spec)
    parameters = encode(spec.parameters)
    return runner_pb2.BenchmarkDescription(
        id=spec.id,
        description=spec.description,
        observation_space=encode(spec.observation_space),
        action_space=encode(spec.action_space),
        horizon=spec.horizon,
        primary_metric=spec.primary_metric,
        direction=runner_pb2.METRIC_DIRECTION_MINIMIZE if spec.direction == "minimize" else runner_pb2.METRIC_DIRECTION_MAXIMIZE,
        parameters=parameters,
        failure_return=spec.failure_return,
        readme=spec.readme,
        program_abi=spec.program_abi,
        metadata=encode(spec.metadata),
        step_seconds=spec.step_seconds,
        episode_seconds=spec.episode_seconds,
        parameters_digest=values.digest(parameters),
    )


def build_feedback(benchmark: Benchmark, records: Any) -> runner_pb2.FeedbackResponse:
    """The Benchmark's Feedback on records, bounded: values over FEEDBACK_LIMIT_BYTES are replaced by a note, and
    artifacts are kept in name order until they take FEEDBACK_ARTIFACTS_LIMIT_BYTES (the rest dropped, and the
    values say so), as are artifacts whose names are not relative POSIX paths of plain names."""
    feedback = benchmark.feedback(feedback_records(records))
    feedback_values = dict(feedback.values)
    artifacts = []
    total = 0
    dropped = []
    badly_named = []
    for name, value in sorted(feedback.artifacts.items()):
        if artifact_name_problem(name):
            badly_named.append(name)
            continue
        artifact = as_artifact(value)
        if total + len(artifact.data) > FEEDBACK_ARTIFACTS_LIMIT_BYTES:
            dropped.append(name)
            continue
        total += len(artifact.data)
        artifacts.append(runner_pb2.Artifact(name=name, data=artifact.data, media_type=artifact.media_type,
                                             retention=_RETENTION[artifact.retention]))
    notes = []
    if badly_named:
        notes.append(f"{len(badly_named)} artifacts whose names are not relative paths of plain file names were dropped: "
                     f"{', '.join(map(repr, badly_named[:5]))}")
    if dropped:
        notes.append(f"{len(dropped)} artifacts past {FEEDBACK_ARTIFACTS_LIMIT_BYTES} bytes were dropped: {', '.join(dropped[:5])}")
    if notes:
        feedback_values["artifacts_error"] = "; ".join(notes)
    encoded = _encoder(benchmark.spec)(feedback_values)
    if encoded.ByteSize() > FEEDBACK_LIMIT_BYTES:
        encoded = values.encode({"feedback_error": f"Feedback values larger than {FEEDBACK_LIMIT_BYTES} bytes were dropped"})
    return runner_pb2.FeedbackResponse(score=float(feedback.score), values=encoded, artifacts=artifacts)


class RunnerService(runner_pb2_grpc.EnvironmentRunnerServicer):
    """gRPC servicer. The lock protects the table of prepared slots only."""

    def __init__(self, benchmark: Benchmark, exchange: Path) -> None:
        self._benchmark = benchmark
        self._exchange = exchange
        self._slots: dict[str, socket.socket] = {}
        self._lock = threading.Lock()

    def Describe(self, request: runner_pb2.DescribeRequest, context: grpc.ServicerContext) -> runner_pb2.BenchmarkDescription:
        return describe(self._benchmark)

    def PlanEpisodes(self, request: runner_pb2.PlanRequest, context: grpc.ServicerContext) -> runner_pb2.PlanResponse:
        try:
            payloads = self._benchmark.plan(request.split, request.seed, request.count)
        except ValueError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        return runner_pb2.PlanResponse(
            episodes=[runner_pb2.EpisodeSpec(split=request.split, index=i, payload=p) for i, p in enumerate(payloads)]
        )

    def PrepareSlot(self, request: runner_pb2.PrepareSlotRequest, context: grpc.ServicerContext) -> runner_pb2.PrepareSlotResponse:
        if not SLOT_PATTERN.match(request.slot):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"bad slot name {request.slot!r}")
        path = self._exchange / request.slot / SOCKET_NAME
        # The socket appears under its name only once the policy (another, unprivileged user) may connect: bound and
        # listening under a hidden name first, then renamed. A policy polling for it never meets the socket as bind
        # made it (0755 by the umask: connect refused with EACCES, which the policy runtime does not retry).
        staged = path.with_name(f".{SOCKET_NAME}.new")
        _unlink_quietly(staged)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(staged))
        os.chmod(staged, 0o666)
        listener.listen(1)
        os.rename(staged, path)
        with self._lock:
            previous = self._slots.pop(request.slot, None)
            self._slots[request.slot] = listener
        if previous is not None:
            previous.close()
        return runner_pb2.PrepareSlotResponse(socket_path=str(path))

    def _take_slot(self, slot: str) -> socket.socket | None:
        with self._lock:
            return self._slots.pop(slot, None)

    def RunEpisode(self, request: runner_pb2.RunEpisodeRequest, context: grpc.ServicerContext) -> runner_pb2.EpisodeRecord:
        listener = self._take_slot(request.slot)
        if listener is None:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"slot {request.slot!r} was not prepared")
        limits = EpisodeLimits.from_proto(request.limits)
        try:
            listener.settimeout(limits.startup_deadline_s)
            try:
                connection, _ = listener.accept()
            except socket.timeout:
                return runner_pb2.EpisodeRecord(
                    episode=request.episode,
                    outcome=runner_pb2.RUNNER_OUTCOME_POLICY_DISCONNECTED,
                    message=f"the policy runtime did not connect within {limits.startup_deadline_s:.3g} s",
                )
        finally:
            listener.close()
            _unlink_quietly(self._exchange / request.slot / SOCKET_NAME)
        channel = FramedSocket(connection, limits.max_frame_bytes, spin=STEP_SPIN)
        try:
            return drive_episode(self._benchmark, request.episode, channel, limits, request.policy_seed, request.program_dir)
        finally:
            channel.close()

    def BuildFeedback(self, request: runner_pb2.FeedbackRequest, context: grpc.ServicerContext) -> runner_pb2.FeedbackResponse:
        try:
            return build_feedback(self._benchmark, request.records)
        except Exception:
            context.abort(grpc.StatusCode.INTERNAL, "Benchmark.feedback failed:\n" + traceback.format_exc())


def _unlink_quietly(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


def serve(benchmark: Benchmark, exchange: Path, workers: int = 16) -> grpc.Server:
    """Start the runner service on EXCHANGE/runner.sock and return the server.

    Messages are bounded by RUNNER_RECEIVE_LIMIT_BYTES in (a BuildFeedback request carries every Episode's
    evidence) and RUNNER_SEND_LIMIT_BYTES out (an Episode record with its evidence, or a Feedback's artifacts).
    """
    options = [("grpc.max_receive_message_length", RUNNER_RECEIVE_LIMIT_BYTES), ("grpc.max_send_message_length", RUNNER_SEND_LIMIT_BYTES)]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers), options=options)
    runner_pb2_grpc.add_EnvironmentRunnerServicer_to_server(RunnerService(benchmark, exchange), server)
    socket_path = exchange / RUNNER_SOCKET
    _unlink_quietly(socket_path)
    server.add_insecure_port(f"unix:{socket_path}")
    server.start()
    return server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="epg-runner", description=__doc__.splitlines()[0])
    parser.add_argument("--entry", required=True, help="Benchmark factory as module:attribute")
    parser.add_argument("--exchange", required=True, type=Path, help="directory shared with the Host and the policy slots")
    args = parser.parse_args(argv)
    benchmark = load_benchmark(args.entry)
    server = serve(benchmark, args.exchange)
    print(f"runner: serving {benchmark.spec.id} on {args.exchange / RUNNER_SOCKET}", flush=True)
    server.wait_for_termination()
    return 0


if __name__ == "__main__":
    sys.exit(main())
