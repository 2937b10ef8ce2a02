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
import importlib
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
from epg_sdk.benchmark import Benchmark
from epg_sdk.protocol import values
from epg_sdk.protocol.framing import STEP_SPIN, FramedSocket
from epg_sdk.runtime.episode_loop import EpisodeLimits, drive_episode, feedback_records

SLOT_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
FEEDBACK_LIMIT_BYTES = 1024 * 1024
SOCKET_NAME = "policy.sock"
RUNNER_SOCKET = "runner.sock"

def load_benchmark(entry: str) -> Benchmark:
    """Return the Benchmark made by the factory named "module:attribute"."""
    module_name, _, attribute = entry.partition(":")
    factory = getattr(importlib.import_module(module_name), attribute)
    benchmark = factory()
    if not isinstance(benchmark, Benchmark):
        raise TypeError(f"{entry} returned {type(benchmark).__name__}, not a Benchmark")
    return benchmark


def describe(benchmark: Benchmark) -> runner_pb2.BenchmarkDescription:
    spec = benchmark.spec
    return runner_pb2.BenchmarkDescription(
        id=spec.id,
        description=spec.description,
        observation_space=values.encode(spec.observation_space),
        action_space=values.encode(spec.action_space),
        horizon=spec.horizon,
        primary_metric=spec.primary_metric,
        direction=runner_pb2.METRIC_DIRECTION_MINIMIZE if spec.direction == "minimize" else runner_pb2.METRIC_DIRECTION_MAXIMIZE,
        parameters=values.encode(spec.parameters),
        failure_return=spec.failure_return,
        readme=spec.readme,
    )


def build_feedback(benchmark: Benchmark, records: Any) -> runner_pb2.FeedbackResponse:
    feedback = benchmark.feedback(feedback_records(records))
    encoded = values.encode(feedback.values)
    if encoded.ByteSize() > FEEDBACK_LIMIT_BYTES:
        encoded = values.encode({"feedback_error": f"Feedback values larger than {FEEDBACK_LIMIT_BYTES} bytes were dropped"})
    return runner_pb2.FeedbackResponse(
        score=float(feedback.score),
        values=encoded,
        artifacts=[runner_pb2.Artifact(name=name, data=data) for name, data in sorted(feedback.artifacts.items())],
    )


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
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(path))
        os.chmod(path, 0o666)  # the policy runs as another, unprivileged user
        listener.listen(1)
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
    """Start the runner service on EXCHANGE/runner.sock and return the server."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers))
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
