"""EvoPolicyGym 0.3 Benchmarks served by our runner: planning, exact values, InvalidAction from step, evidence,
Feedback artifacts, the parameters digest, discovery and entries, and our own Benchmarks unchanged.

Engine-free: a fake policy speaks the framed protocol on a socketpair (or on the runner's slot socket), and the
runner's real gRPC server runs in-process. Their `evopolicygym` is ours, `compat/evopolicygym`; the `toy_walk` package
is in tests/support/evopolicygym_toys.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

REPO = Path(__file__).resolve().parents[2]
TOYS = REPO / "tests" / "support" / "evopolicygym_toys"
COMPAT = REPO / "compat"
SEARCH_PATH = [str(COMPAT), str(TOYS)]
for entry in reversed(SEARCH_PATH):
    if entry not in sys.path:
        sys.path.insert(0, entry)

from evopolicygym.authoring import BenchmarkSpec, EpisodeSpec, Feedback, InvalidAction, Step  # noqa: E402
from evopolicygym.policy import TensorValue  # noqa: E402
from toy_walk import ToyWalkBenchmark, ToyWalkConfig, frame  # noqa: E402

from epg.v1 import policy_pb2, runner_pb2, runner_pb2_grpc  # noqa: E402
from epg.v1 import values_pb2 as pb  # noqa: E402
from epg_sdk import benchmark as sdk  # noqa: E402
from epg_sdk.checks import check_benchmark  # noqa: E402
from epg_sdk.evopolicygym import EntryError, EvoPolicyGymBenchmark, adapter, construct, discover, parse_entry  # noqa: E402
from epg_sdk.evopolicygym.adapter import EvidenceError, decode_episode, decode_evidence  # noqa: E402
from epg_sdk.evopolicygym.exact import decode_exact, encode_exact  # noqa: E402
from epg_sdk.outcomes import ContainerExit, classify_episode  # noqa: E402
from epg_sdk.protocol import values  # noqa: E402
from epg_sdk.protocol.codes import OUTCOMES, failure_to_proto  # noqa: E402
from epg_sdk.protocol.framing import FramedSocket, PeerClosed  # noqa: E402
from epg_sdk.runtime import episode_loop, runner  # noqa: E402
from epg_sdk.runtime.episode_loop import EpisodeLimits, drive_episode  # noqa: E402
from epg_sdk.runtime.runner import build_feedback, describe, load_benchmark, serve  # noqa: E402

POLICY_SEED = 7
LIMITS = EpisodeLimits(step_deadline_s=10.0, episode_deadline_s=60.0, startup_deadline_s=10.0, max_frame_bytes=64 * 1024 * 1024)


class FakePolicy:
    """A policy on the far end of a framed socket: Ready to Start, then the scripted actions (the last repeats),
    or what a function of the observation gives, each encoded exactly; it keeps the Start frame and every
    observation it was sent, decoded exactly."""

    def __init__(self, actions: list[Any] | Callable[[Any], Any]) -> None:
        self.actions = actions
        self.start: policy_pb2.Start | None = None
        self.observations: list[Any] = []

    def serve(self, sock: socket.socket) -> None:
        channel = FramedSocket(sock, LIMITS.max_frame_bytes)
        try:
            while True:
                incoming = channel.receive(policy_pb2.PolicyFrame(), time.monotonic() + 30)
                answer = policy_pb2.RuntimeFrame()
                kind = incoming.WhichOneof("kind")
                if kind == "start":
                    self.start = incoming.start
                    answer.ready.SetInParent()
                elif kind == "observation":
                    self.observations.append(decode_exact(incoming.observation.value))
                    if callable(self.actions):
                        action = self.actions(self.observations[-1])
                    else:
                        action = self.actions[min(len(self.observations), len(self.actions)) - 1]
                    answer.action.value.CopyFrom(encode_exact(action))
                else:
                    answer.goodbye.SetInParent()
                channel.send(answer, time.monotonic() + 30)
                if kind == "stop":
                    return
        except PeerClosed:
            return
        finally:
            channel.close()


def classified(record: runner_pb2.EpisodeRecord) -> runner_pb2.EpisodeRecord:
    """The record as the Host hands it to BuildFeedback: its failure code set."""
    verdict = classify_episode(OUTCOMES[record.outcome], record.message, ContainerExit(exit_code=0))
    record.failure = failure_to_proto(verdict.failure)
    return record


def run_episode(benchmark: sdk.Benchmark, payload: bytes, actions: list[Any], index: int = 0) -> tuple[runner_pb2.EpisodeRecord, FakePolicy]:
    policy = FakePolicy(actions)
    ours, theirs = socket.socketpair()
    thread = threading.Thread(target=policy.serve, args=(theirs,), daemon=True)
    thread.start()
    channel = FramedSocket(ours, LIMITS.max_frame_bytes)
    try:
        record = drive_episode(benchmark, runner_pb2.EpisodeSpec(split="train", index=index, payload=payload), channel, LIMITS,
                               POLICY_SEED, "/program")
    finally:
        channel.close()
        thread.join(timeout=30)
    return classified(record), policy


def toy(profile: str = "short") -> EvoPolicyGymBenchmark:
    return EvoPolicyGymBenchmark(ToyWalkBenchmark(ToyWalkConfig(profile=profile)))


@pytest.fixture
def start_runner() -> Iterator[Any]:
    """Start the runner's real gRPC server for a Benchmark on a fresh exchange directory; return a stub whose
    channel takes the runner's message bounds, and the directory. Everything stops at teardown."""
    started: list[tuple[grpc.Server, grpc.Channel, Path]] = []

    def start(benchmark: sdk.Benchmark) -> tuple[runner_pb2_grpc.EnvironmentRunnerStub, Path]:
        exchange = Path(tempfile.mkdtemp(prefix="epg-adapter-"))
        server = serve(benchmark, exchange, workers=4)
        options = [("grpc.max_receive_message_length", episode_loop.RUNNER_RECEIVE_LIMIT_BYTES),
                   ("grpc.max_send_message_length", episode_loop.RUNNER_RECEIVE_LIMIT_BYTES)]
        channel = grpc.insecure_channel(f"unix:{exchange / 'runner.sock'}", options=options)
        started.append((server, channel, exchange))
        return runner_pb2_grpc.EnvironmentRunnerStub(channel), exchange

    yield start
    for server, channel, exchange in started:
        channel.close()
        server.stop(grace=None)
        shutil.rmtree(exchange, ignore_errors=True)


@pytest.fixture
def runner_stub(start_runner: Any) -> tuple[runner_pb2_grpc.EnvironmentRunnerStub, Path]:
    """The runner serving the short toy walk."""
    return start_runner(toy())


def run_over_grpc(stub: runner_pb2_grpc.EnvironmentRunnerStub, exchange: Path, episode: runner_pb2.EpisodeSpec,
                  actions: list[Any] | Callable[[Any], Any]) -> tuple[runner_pb2.EpisodeRecord, FakePolicy]:
    slot = f"slot-{episode.index}"
    (exchange / slot).mkdir()
    path = stub.PrepareSlot(runner_pb2.PrepareSlotRequest(slot=slot)).socket_path
    policy = FakePolicy(actions)

    def connect() -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(path)
        policy.serve(sock)

    thread = threading.Thread(target=connect, daemon=True)
    thread.start()
    record = stub.RunEpisode(runner_pb2.RunEpisodeRequest(slot=slot, episode=episode, policy_seed=POLICY_SEED, limits=LIMITS.to_proto(),
                                                          program_dir="/program"))
    thread.join(timeout=30)
    return classified(record), policy


# Planning


def test_a_plan_encodes_their_episodes_losslessly_with_tuples_unsigned_64_bit_integers_and_tensors():
    benchmark = toy()
    payloads = benchmark.plan("validation", 5, 3)
    planned = ToyWalkBenchmark().episodes("validation", seed=5, count=3)
    decoded = [decode_episode(payload, benchmark._types) for payload in payloads]
    assert decoded == list(planned)
    for index, episode in enumerate(decoded):
        assert episode.environment_seed == 2**64 - 1 - 5 - 1000 - index
        assert type(episode.scenario["goal"]) is tuple and type(episode.scenario["goal"][1]) is list
        assert episode.scenario["tag"] == 2**63 + index
        assert type(episode.scenario["tile"]) is TensorValue and episode.scenario["tile"] == frame(index)
    assert benchmark.plan("validation", 5, 3) == payloads, "the same request plans the same bytes"
    assert benchmark.plan("validation", 6, 3) != payloads and benchmark.plan("test", 5, 3) != payloads


def test_planning_passes_the_hosts_split_and_seed_to_their_episodes_unchanged(runner_stub):
    stub, _ = runner_stub
    response = stub.PlanEpisodes(runner_pb2.PlanRequest(split="test", seed=2**64 - 2, count=2))
    assert [(e.split, e.index) for e in response.episodes] == [("test", 0), ("test", 1)]
    types = toy()._types
    assert [decode_episode(e.payload, types) for e in response.episodes] == list(ToyWalkBenchmark().episodes("test", seed=2**64 - 2, count=2))
    with pytest.raises(grpc.RpcError) as refused:
        stub.PlanEpisodes(runner_pb2.PlanRequest(split="holdout", seed=1, count=1))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT


# The description


def test_describe_gives_their_spec_with_the_program_abi_metadata_and_a_parameters_digest(runner_stub):
    stub, _ = runner_stub
    described = stub.Describe(runner_pb2.DescribeRequest())
    theirs = ToyWalkBenchmark().spec
    assert (described.id, described.description, described.horizon, described.primary_metric) == (
        theirs.id, theirs.description, theirs.max_episode_steps, theirs.primary_metric)
    assert described.direction == runner_pb2.METRIC_DIRECTION_MAXIMIZE
    assert described.program_abi == "policy/v2"
    assert decode_exact(described.observation_space) == theirs.observation_space
    assert type(decode_exact(described.observation_space)["position"]) is tuple, "spaces pass through as they are"
    assert decode_exact(described.metadata) == {"failure_return": -5.0, "provider": "tests"}
    assert decode_exact(described.parameters) == {"length": 3, "profile": "short"}
    assert described.failure_return == -5.0
    assert (described.step_seconds, described.episode_seconds) == (0.0, 0.0), "their spec has no time limits: the Host's hold"
    assert described.parameters_digest == values.digest(described.parameters)


class _NoFailureKey:
    """A Benchmark whose spec states no failure score: what a failed Episode scores is what its feedback says."""

    def __init__(self) -> None:
        self.inner = ToyWalkBenchmark()
        spec = self.inner.spec
        self.spec = BenchmarkSpec(id="toy/no-key/v1", description=spec.description, observation_space=spec.observation_space,
                                  action_space=spec.action_space, metadata={}, max_episode_steps=spec.max_episode_steps,
                                  primary_metric=spec.primary_metric, score_direction="maximize")

    def episodes(self, split: str, *, seed: int, count: int) -> Any:
        return self.inner.episodes(split, seed=seed, count=count)

    def make_environment(self, episode: EpisodeSpec) -> Any:
        return self.inner.make_environment(episode)

    def feedback(self, episodes: Any) -> Feedback:
        return Feedback(score=sum(-3.5 if r.policy_failure else r.total_reward for r in episodes) / len(episodes))


def test_the_failure_return_is_their_metadatas_or_else_what_their_feedback_gives_a_failed_episode():
    assert toy().spec.failure_return == -5.0
    assert EvoPolicyGymBenchmark(_NoFailureKey()).spec.failure_return == -3.5


def test_the_parameters_digest_is_stable_and_changes_with_any_parameter():
    parameters = {"length": 3, "gravity": 9.8, "names": ["a", "b"], "nested": {"x": True, "y": None}}
    digest = values.digest(values.encode(parameters))
    reordered = dict(reversed(list(parameters.items())))
    assert values.digest(values.encode(reordered)) == digest, "map order does not matter"
    assert values.digest(values.encode({"a": 1, "b": [1.0, "x"]})) == "sha256:3bd0059e0343afff5d71bf2a0a19952811f6aee63944f567873b918835788ca1"
    for changed in ({**parameters, "length": 4}, {**parameters, "length": 3.0}, {**parameters, "names": ["a", "c"]},
                    {**parameters, "nested": {"x": False, "y": None}}, {**parameters, "extra": 0}, {k: v for k, v in parameters.items() if k != "gravity"}):
        assert values.digest(values.encode(changed)) != digest, changed
    assert values.digest(encode_exact(("a", 1))) != values.digest(encode_exact(["a", 1])), "a tuple is not a list"
    assert describe(toy("short")).parameters_digest != describe(toy("long")).parameters_digest


# Episodes: exact values, InvalidAction from step, evidence


def test_observations_reach_the_policy_exactly_and_its_actions_reach_their_environment_as_sent():
    benchmark = toy()
    (payload,) = benchmark.plan("train", 0, 1)
    record, policy = run_episode(benchmark, payload, [1])
    assert record.outcome == runner_pb2.RUNNER_OUTCOME_COMPLETED and record.terminated and record.steps == 3
    assert policy.observations[0] == {"position": (0, 3), "frame": frame(0)}
    assert type(policy.observations[0]["position"]) is tuple and type(policy.observations[0]["frame"]) is TensorValue
    assert policy.start is not None and policy.start.benchmark_id == "toy/walk-short/v1"


def test_an_invalid_action_raised_inside_step_ends_the_episode_as_the_policys_invalid_action():
    benchmark = toy("long")
    (payload,) = benchmark.plan("train", 0, 1)
    record, policy = run_episode(benchmark, payload, [1, 1, 9, 1])
    assert record.outcome == runner_pb2.RUNNER_OUTCOME_INVALID_ACTION
    assert record.failure == runner_pb2.FAILURE_CODE_INVALID_ACTION
    assert record.message == "invalid action at step 2: the Environment refused the action"
    assert record.steps == 2 and record.total_reward == 2.0 and len(policy.observations) == 3, "the Episode ended at the refused action"
    content = build_feedback(benchmark, [record])
    (row,) = decode_exact(content.values)["episodes"]
    assert row["failure"] == "invalid_action" and row["actions"] == [1, 1] and row["steps"] == 2
    assert content.score == -5.0


def _nested(depth: int) -> pb.Value:
    """A Value of lists nested depth deep (built by hand: the encoders refuse it)."""
    value = pb.Value(int64=1)
    for _ in range(depth):
        outer = pb.Value()
        outer.list.items.add().CopyFrom(value)
        value = outer
    return value


@pytest.mark.parametrize(("sent", "why"), [
    (pb.Value(float64=float("nan")), "not finite"),
    (pb.Value(float64=float("inf")), "not finite"),
    (pb.Value(tensor=pb.Tensor(dtype=pb.DTYPE_FLOAT32, shape=[1], data=struct.pack("<f", float("nan")))), "finite"),
    (pb.Value(tensor=pb.Tensor(dtype=pb.DTYPE_UINT8, shape=[3], data=b"\x01")), "tensor"),
    (_nested(40), "nested too deeply"),
])
def test_an_action_that_is_not_one_of_their_exact_values_is_the_policys_protocol_violation(sent, why):
    class Sends(FakePolicy):
        def serve(self, sock: socket.socket) -> None:
            channel = FramedSocket(sock, LIMITS.max_frame_bytes)
            try:
                channel.receive(policy_pb2.PolicyFrame(), time.monotonic() + 30)
                channel.send(policy_pb2.RuntimeFrame(ready=policy_pb2.Ready()), time.monotonic() + 30)
                channel.receive(policy_pb2.PolicyFrame(), time.monotonic() + 30)
                channel.send(policy_pb2.RuntimeFrame(action=policy_pb2.Action(value=sent)), time.monotonic() + 30)
                channel.receive(policy_pb2.PolicyFrame(), time.monotonic() + 30)
            except PeerClosed:
                pass
            finally:
                channel.close()

    benchmark = toy()
    (payload,) = benchmark.plan("train", 0, 1)
    policy = Sends([])
    ours, theirs = socket.socketpair()
    thread = threading.Thread(target=policy.serve, args=(theirs,), daemon=True)
    thread.start()
    channel = FramedSocket(ours, LIMITS.max_frame_bytes)
    record = drive_episode(benchmark, runner_pb2.EpisodeSpec(split="train", index=0, payload=payload), channel, LIMITS, POLICY_SEED, "/p")
    channel.close()
    thread.join(timeout=30)
    assert record.outcome == runner_pb2.RUNNER_OUTCOME_PROTOCOL_VIOLATION and record.steps == 0
    assert record.message.startswith("malformed action value") and why in record.message, record.message


class _OurRefusingEnvironment:
    def reset(self) -> list[float]:
        return [0.0]

    def step(self, action: Any) -> sdk.StepResult:
        raise sdk.InvalidAction(f"{action} is not allowed here")

    def summary(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        pass


class _OurBenchmark(sdk.Benchmark):
    spec = sdk.BenchmarkSpec(id="ours/refusing-v1", description="d", observation_space={"type": "box"},
                             action_space={"type": "discrete", "n": 2}, horizon=5, failure_return=0.0)

    def make_environment(self, payload: bytes) -> _OurRefusingEnvironment:
        return _OurRefusingEnvironment()

    def validate_action(self, action: Any) -> Any:
        return int(action)


def test_our_own_environments_may_raise_invalid_action_from_step_too():
    record, _ = run_episode(_OurBenchmark(), b"{}", [1])
    assert record.outcome == runner_pb2.RUNNER_OUTCOME_INVALID_ACTION and record.failure == runner_pb2.FAILURE_CODE_INVALID_ACTION
    assert record.message == "invalid action at step 0: 1 is not allowed here" and record.steps == 0


def test_the_whole_trajectory_reaches_their_feedback_through_the_runner(runner_stub):
    stub, exchange = runner_stub
    episodes = stub.PlanEpisodes(runner_pb2.PlanRequest(split="train", seed=11, count=2)).episodes
    first, _ = run_over_grpc(stub, exchange, episodes[0], [1, 0, 1, 1])
    second, _ = run_over_grpc(stub, exchange, episodes[1], [0])
    assert first.evidence and second.evidence and not first.HasField("summary")
    response = stub.BuildFeedback(runner_pb2.FeedbackRequest(records=[first, second]))
    content = decode_exact(response.values)
    planned = ToyWalkBenchmark().episodes("train", seed=11, count=2)
    one, two = content["episodes"]
    assert one["actions"] == [1, 0, 1, 1] and one["metric_steps"] == [1, 2, 3, 4]
    assert one["frames"] == [frame(1), frame(1), frame(2), frame(3)] and all(type(f) is TensorValue for f in one["frames"])
    assert one["initial_observation"] == {"position": (0, 3), "frame": frame(0)} and one["last"] == (True, False)
    assert (one["policy_seed"], one["environment_seed"], one["scenario"]) == (POLICY_SEED, planned[0].environment_seed, planned[0].scenario)
    assert two["steps"] == 6 and two["last"] == (False, True) and two["failure"] is None and two["actions"] == [0] * 6
    assert response.score == pytest.approx((2.5 + -3.0) / 2)


def test_evidence_over_its_bound_is_dropped_with_a_reason_and_their_feedback_is_refused(monkeypatch):
    monkeypatch.setattr(episode_loop, "EVIDENCE_LIMIT_BYTES", 100)  # the toy walk compresses to a few hundred bytes
    benchmark = toy("long")
    (payload,) = benchmark.plan("train", 0, 1)
    record, _ = run_episode(benchmark, payload, [1])
    assert record.outcome == runner_pb2.RUNNER_OUTCOME_COMPLETED and record.steps == 6
    assert record.evidence == b""
    assert values.decode(record.summary) == {"evidence_error": "EvidenceError: evidence over 100 bytes was dropped"}
    with pytest.raises(EvidenceError, match=r"Episode 0 has no evidence \(EvidenceError: evidence over 100 bytes was dropped\)"):
        build_feedback(benchmark, [record])


class _Oversized:
    def __init__(self, size: int) -> None:
        self.size = size

    def summary(self) -> dict[str, Any]:
        return {"end": "goal"}

    def evidence(self, *, policy_seed: int) -> bytes:
        return b"e" * self.size


def test_the_runner_bounds_any_environments_evidence_and_says_why_it_dropped_it(monkeypatch):
    monkeypatch.setattr(episode_loop, "EVIDENCE_LIMIT_BYTES", 1000)
    kept = runner_pb2.EpisodeRecord()
    episode_loop._attach_summary(_Oversized(1000), kept, policy_seed=3)
    assert kept.evidence == b"e" * 1000
    dropped = runner_pb2.EpisodeRecord()
    episode_loop._attach_summary(_Oversized(1001), dropped, policy_seed=3)
    assert dropped.evidence == b""
    assert values.decode(dropped.summary) == {"end": "goal", "evidence_error": "evidence of 1001 bytes, over 1000, was dropped"}
    (sdk_record,) = episode_loop.feedback_records([kept])
    assert sdk_record.evidence == b"e" * 1000


class _BigFrames(ToyWalkBenchmark):
    """The toy walk with 3 MiB of metrics per step: an Episode's evidence is above gRPC's default 4 MiB."""

    def make_environment(self, episode: EpisodeSpec) -> Any:
        environment = super().make_environment(episode)
        step = environment.step

        def big_step(action: Any) -> Step:
            result = step(action)
            # random bytes: evidence is compressed, and these must stay above gRPC's default message size
            big = TensorValue(dtype="uint8", shape=(3 * 1024 * 1024,), data=random.Random(action).randbytes(3 * 1024 * 1024))
            return Step(observation=result.observation, reward=result.reward, terminated=result.terminated,
                        truncated=result.truncated, metrics={**result.metrics, "frame": big})

        environment.step = big_step
        return environment

    def feedback(self, episodes: Any) -> Feedback:
        sizes = [len(t.step.metrics["frame"].data) for r in episodes for t in r.transitions]
        return Feedback(score=float(len(sizes)), content={"sizes": sizes})


def test_evidence_larger_than_grpcs_default_message_size_reaches_feedback(start_runner):
    stub, exchange = start_runner(EvoPolicyGymBenchmark(_BigFrames()))
    (episode,) = stub.PlanEpisodes(runner_pb2.PlanRequest(split="train", seed=0, count=1)).episodes
    record, _ = run_over_grpc(stub, exchange, episode, [1])
    assert record.steps == 3 and len(record.evidence) > 9 * 1024 * 1024
    response = stub.BuildFeedback(runner_pb2.FeedbackRequest(records=[record]))
    assert decode_exact(response.values) == {"sizes": [3 * 1024 * 1024] * 3}


class _GameFrames(ToyWalkBenchmark):
    """The toy walk with a 230 KB frame of a game per step (mostly one colour): what compression is for."""

    def make_environment(self, episode: EpisodeSpec) -> Any:
        environment = super().make_environment(episode)
        step = environment.step

        def framed_step(action: Any) -> Step:
            result = step(action)
            pixels = bytearray(240 * 320 * 3)
            pixels[1000:1300] = b"\xff" * 300  # a sprite
            frame = TensorValue(dtype="uint8", shape=(240, 320, 3), data=bytes(pixels))
            return Step(observation=result.observation, reward=result.reward, terminated=result.terminated,
                        truncated=result.truncated, metrics={**result.metrics, "frame": frame})

        environment.step = framed_step
        return environment

    def feedback(self, episodes: Any) -> Feedback:
        frames = [t.step.metrics["frame"] for r in episodes for t in r.transitions]
        return Feedback(score=float(len(frames)), content={"ok": all(f.data[1000] == 255 and f.data[999] == 0 for f in frames)})


def test_evidence_is_compressed_as_it_is_recorded_and_read_back_whole():
    benchmark = EvoPolicyGymBenchmark(_GameFrames())
    (payload,) = benchmark.plan("train", 0, 1)
    record, _ = run_episode(benchmark, payload, [1])
    assert record.steps == 3
    assert 0 < len(record.evidence) < 3 * 240 * 320 * 3 // 50  # three raw frames are 691,200 bytes
    feedback = build_feedback(benchmark, [record])
    assert feedback.score == 3.0 and decode_exact(feedback.values) == {"ok": True}


def test_evidence_that_would_grow_past_its_decoded_bound_is_dropped_when_recorded(monkeypatch):
    monkeypatch.setattr(adapter, "EVIDENCE_DECODED_LIMIT_BYTES", 500_000)  # under three 230 KB frames
    benchmark = EvoPolicyGymBenchmark(_GameFrames())
    (payload,) = benchmark.plan("train", 0, 1)
    record, _ = run_episode(benchmark, payload, [1])
    assert record.evidence == b""
    assert values.decode(record.summary) == {"evidence_error": "EvidenceError: evidence over 500000 bytes before compression was dropped"}


@pytest.mark.parametrize(("mangle", "problem"), [
    (lambda data: data[: len(data) // 2], "evidence is truncated"),
    (lambda data: data + b"more", "evidence has bytes past its end"),
    (lambda data: b"not zlib at all", "malformed evidence"),
    (lambda data: zlib.compress(b"\x00\x00\x00\x05abc"), "evidence is truncated|malformed evidence"),
])
def test_evidence_the_adapter_did_not_write_is_refused(mangle, problem):
    benchmark = toy("long")
    (payload,) = benchmark.plan("train", 0, 1)
    record, _ = run_episode(benchmark, payload, [1])
    assert decode_evidence(record.evidence, adapter._their_types())["transitions"]
    with pytest.raises(EvidenceError, match=problem):
        decode_evidence(mangle(record.evidence), adapter._their_types())


def test_evidence_decompressing_past_its_bound_is_refused(monkeypatch):
    monkeypatch.setattr(adapter, "EVIDENCE_DECODED_LIMIT_BYTES", 1000)
    with pytest.raises(EvidenceError, match="evidence grows past 1000 bytes"):
        decode_evidence(zlib.compress(b"\x00" * 10_000_000), adapter._their_types())


# Feedback


def test_their_artifacts_keep_path_names_media_types_and_retention_in_the_feedback_response(runner_stub):
    stub, exchange = runner_stub
    episodes = stub.PlanEpisodes(runner_pb2.PlanRequest(split="train", seed=1, count=2)).episodes
    records = [run_over_grpc(stub, exchange, episode, [1])[0] for episode in episodes]
    response = stub.BuildFeedback(runner_pb2.FeedbackRequest(records=records))
    assert [(a.name, a.media_type, a.retention) for a in response.artifacts] == [
        ("episode-000/replay.gif", "image/gif", runner_pb2.ARTIFACT_RETENTION_BULK),
        ("episode-001/replay.gif", "image/gif", runner_pb2.ARTIFACT_RETENTION_BULK),
        ("trace.jsonl", "application/x-ndjson", runner_pb2.ARTIFACT_RETENTION_PERMANENT),
    ]
    assert response.artifacts[1].data == b"GIF89a\x01"
    assert response.artifacts[2].data.decode().splitlines() == ['{"episode": 0, "steps": 3}', '{"episode": 1, "steps": 3}']


class _ManyArtifacts(sdk.Benchmark):
    spec = sdk.BenchmarkSpec(id="ours/many-v1", description="d", observation_space={}, action_space={}, horizon=1, failure_return=0.0)

    def make_environment(self, payload: bytes) -> Any:
        raise NotImplementedError

    def validate_action(self, action: Any) -> Any:
        return action

    def feedback(self, records: list[sdk.EpisodeRecord]) -> sdk.Feedback:
        return sdk.Feedback(score=0.0, values={"n": 0}, artifacts={"a.bin": b"x" * 6, "b.bin": b"y" * 5, "c/../d": b"z", "e.bin": b"w" * 4})


def test_feedback_artifacts_past_their_bound_or_badly_named_are_dropped_and_the_values_say_so(monkeypatch):
    monkeypatch.setattr(runner, "FEEDBACK_ARTIFACTS_LIMIT_BYTES", 10)
    response = build_feedback(_ManyArtifacts(), [])
    assert [(a.name, a.data) for a in response.artifacts] == [("a.bin", b"x" * 6), ("e.bin", b"w" * 4)]
    assert values.decode(response.values) == {"n": 0, "artifacts_error": (
        "1 artifacts whose names are not relative paths of plain file names were dropped: 'c/../d'; "
        "1 artifacts past 10 bytes were dropped: b.bin")}


def test_the_runner_refuses_a_request_over_its_receive_bound(start_runner, monkeypatch):
    monkeypatch.setattr(runner, "RUNNER_RECEIVE_LIMIT_BYTES", 1024 * 1024)
    stub, _ = start_runner(toy())
    with pytest.raises(grpc.RpcError) as refused:
        stub.BuildFeedback(runner_pb2.FeedbackRequest(records=[runner_pb2.EpisodeRecord(evidence=b"x" * (2 * 1024 * 1024))]))
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


@pytest.mark.parametrize(("failure", "theirs"), [
    (runner_pb2.FAILURE_CODE_EXCEPTION, "exception"), (runner_pb2.FAILURE_CODE_TIMEOUT, "timeout"),
    (runner_pb2.FAILURE_CODE_INVALID_ACTION, "invalid_action"), (runner_pb2.FAILURE_CODE_PROTOCOL_VIOLATION, "protocol_error"),
    (runner_pb2.FAILURE_CODE_OUT_OF_MEMORY, "protocol_error"), (runner_pb2.FAILURE_CODE_CRASHED, "protocol_error"),
])
def test_our_failure_codes_reach_their_feedback_as_theirs(failure, theirs):
    benchmark = toy()
    (payload,) = benchmark.plan("train", 0, 1)
    record, _ = run_episode(benchmark, payload, [0, 0])
    record.failure = failure
    (row,) = decode_exact(build_feedback(benchmark, [record]).values)["episodes"]
    assert row["failure"] == theirs


def test_an_episode_the_host_failed_after_the_environment_ended_it_counts_as_failed():
    benchmark = toy()
    (payload,) = benchmark.plan("train", 0, 1)
    record, _ = run_episode(benchmark, payload, [1])
    record.failure = runner_pb2.FAILURE_CODE_OUT_OF_MEMORY
    response = build_feedback(benchmark, [record])
    (row,) = decode_exact(response.values)["episodes"]
    assert (row["failure"], row["steps"], response.score) == ("protocol_error", 2, -5.0)


# Discovery and entries


def test_discovery_lists_the_default_benchmark_and_one_per_other_profile():
    problems: list[str] = []
    assert discover("toy_walk", problems) == [
        {"id": "toy/walk-short/v1", "entry": "toy_walk:ToyWalkBenchmark", "class": "ToyWalkBenchmark", "profile": "short"},
        {"id": "toy/walk-long/v1", "entry": "toy_walk:ToyWalkBenchmark?profile=long", "class": "ToyWalkBenchmark", "profile": "long"},
    ]
    assert problems == []


_SHAPES = {
    "config.py": """
from dataclasses import dataclass
from typing import Literal

_PROFILES = {"small": 5, "large": 9}
Observation = Literal["rgb", "symbolic"]
GAME_PROFILES = ("Tetris", "Pong")


@dataclass(frozen=True)
class TableConfig:
    profile: str = "small"


@dataclass(frozen=True)
class SuffixConfig:
    observation_profile: Observation = "rgb"
    horizon: int = 10


@dataclass(frozen=True)
class GameConfig:
    game: str = "Pong"
""",
    "__init__.py": """
from .config import GAME_PROFILES, GameConfig, SuffixConfig, TableConfig


class _Base:
    def __init__(self, name):
        self.spec = type("Spec", (), {"id": name})()

    def episodes(self, split, *, seed, count):
        return ()

    def make_environment(self, episode):
        raise NotImplementedError

    def feedback(self, episodes):
        raise NotImplementedError


class Plain(_Base):
    def __init__(self):
        super().__init__("shapes/plain")


class Table(_Base):
    def __init__(self, config: TableConfig | None = None):
        super().__init__("shapes/table-" + (config or TableConfig()).profile)


class Suffix(_Base):
    def __init__(self, config: SuffixConfig | None = None):
        super().__init__("shapes/suffix-" + (config or SuffixConfig()).observation_profile)


class Game(_Base):
    def __init__(self, config: GameConfig | None = None):
        config = config or GameConfig()
        if config.game == "Tetris":
            raise ValueError("the Tetris ROM is not installed")
        super().__init__("shapes/game-" + config.game)


class Broken(_Base):
    def __init__(self):
        raise RuntimeError("needs a download")


__all__ = ["GAME_PROFILES", "Broken", "Game", "Plain", "Suffix", "Table"]
""",
}


def test_discovery_finds_profiles_in_a_table_a_literal_field_or_an_exported_tuple_and_says_what_it_cannot_construct(tmp_path, monkeypatch):
    package = tmp_path / "discovery_shapes"
    package.mkdir()
    for name, text in _SHAPES.items():
        (package / name).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    problems: list[str] = []
    found = discover("discovery_shapes", problems)
    assert [(row["entry"].partition(":")[2], row["id"], row["profile"]) for row in found] == [
        ("Game", "shapes/game-Pong", "Pong"),
        ("Plain", "shapes/plain", None),
        ("Suffix", "shapes/suffix-rgb", "rgb"),
        ("Suffix?profile=symbolic", "shapes/suffix-symbolic", "symbolic"),
        ("Table", "shapes/table-small", "small"),
        ("Table?profile=large", "shapes/table-large", "large"),
    ]
    assert problems == ["discovery_shapes:Broken: RuntimeError: needs a download",
                        "discovery_shapes:Game?profile=Tetris: ValueError: the Tetris ROM is not installed"]
    assert construct("discovery_shapes:Suffix?profile=symbolic").spec.id == "shapes/suffix-symbolic"


def test_discovery_takes_the_profiles_of_a_tuple_the_package_exports_as_plain_profiles(tmp_path, monkeypatch):
    package = tmp_path / "plain_profiles"
    package.mkdir()
    (package / "__init__.py").write_text(_SHAPES["__init__.py"].split("class Plain")[0].replace(
        "from .config import GAME_PROFILES, GameConfig, SuffixConfig, TableConfig", """
from dataclasses import dataclass

PROFILES = ("calm", "stormy")


@dataclass(frozen=True)
class Config:
    profile: str = PROFILES[0]
""") + """
class Weather(_Base):
    def __init__(self, config: Config | None = None):
        super().__init__("plain/" + (config or Config()).profile)


__all__ = ["PROFILES", "Config", "Weather"]
""")
    monkeypatch.syspath_prepend(str(tmp_path))
    problems: list[str] = []
    assert [(row["entry"], row["id"], row["profile"]) for row in discover("plain_profiles", problems)] == [
        ("plain_profiles:Weather", "plain/calm", "calm"), ("plain_profiles:Weather?profile=stormy", "plain/stormy", "stormy")]
    assert problems == []


def test_the_discover_command_prints_the_list_as_json():
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([*SEARCH_PATH, str(REPO / "sdk"), str(REPO)])}
    done = subprocess.run([sys.executable, "-m", "epg_sdk.evopolicygym", "discover", "toy_walk"], capture_output=True, text=True,
                          env=environment, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert [(row["id"], row["entry"]) for row in json.loads(done.stdout)] == [
        ("toy/walk-short/v1", "toy_walk:ToyWalkBenchmark"), ("toy/walk-long/v1", "toy_walk:ToyWalkBenchmark?profile=long")]


def test_every_discovered_entry_loads_the_benchmark_it_names_wrapped_as_ours():
    for row in discover("toy_walk"):
        benchmark = load_benchmark(row["entry"])
        assert isinstance(benchmark, EvoPolicyGymBenchmark) and benchmark.spec.id == row["id"]
    assert load_benchmark("toy_walk:ToyWalkBenchmark?profile=long").spec.horizon == 12


@pytest.mark.parametrize("entry", ["toy_walk", "toy_walk:", "toy_walk:ToyWalkBenchmark?game=long",
                                   "toy_walk:ToyWalkBenchmark?profile=long&profile=short", "toy_walk:ToyWalkBenchmark?profile="])
def test_a_malformed_entry_is_refused_with_its_reason(entry):
    with pytest.raises(EntryError):
        parse_entry(entry)


def test_a_profile_the_benchmark_does_not_have_is_refused_by_their_config():
    with pytest.raises(ValueError, match="profile must be one of"):
        load_benchmark("toy_walk:ToyWalkBenchmark?profile=huge")
    with pytest.raises(EntryError, match="takes no profile"):
        load_benchmark("toy_walk:frame?profile=short")


# Conformance checks


def test_the_conformance_checks_pass_their_benchmark_with_exact_values_and_feedback_from_real_episodes():
    report = check_benchmark(toy("long"))
    assert report.ok, report.failures()
    assert [c.name for c in report.checks][-1] == "feedback is bounded and free of private data"


class _RefusesEverything(ToyWalkBenchmark):
    """Its Environment refuses every action, as an AtCoder package refuses the default action 0."""

    def make_environment(self, episode: EpisodeSpec) -> Any:
        environment = super().make_environment(episode)

        def refuse(action: Any) -> Step:
            raise InvalidAction()

        environment.step = refuse
        return environment


def test_an_episode_ended_by_invalid_action_is_a_trajectory_the_checks_replay():
    report = check_benchmark(EvoPolicyGymBenchmark(_RefusesEverything()))
    assert report.ok, report.failures()


def test_the_check_command_takes_an_entry_with_a_profile():
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([*SEARCH_PATH, str(REPO / "sdk"), str(REPO)])}
    done = subprocess.run([sys.executable, "-m", "epg_sdk.checks", "--entry", "toy_walk:ToyWalkBenchmark?profile=long"], capture_output=True,
                          text=True, env=environment, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["benchmark"] == "toy/walk-long/v1" and report["ok"] is True


# Our own Benchmarks


class _Plain(sdk.Benchmark):
    spec = sdk.BenchmarkSpec(id="ours/plain-v1", description="d", observation_space={"type": "box", "shape": [2]},
                             action_space={"type": "discrete", "n": 2}, horizon=5, failure_return=-1.0, parameters={"g": 9.8})

    def make_environment(self, payload: bytes) -> Any:
        raise NotImplementedError

    def validate_action(self, action: Any) -> Any:
        return action

    def feedback(self, records: list[sdk.EpisodeRecord]) -> sdk.Feedback:
        artifacts = {"episodes.csv": b"a,b\n", "x/replay.gif": sdk.Artifact(b"GIF", "image/gif", "bulk")}
        return sdk.Feedback(score=1.5, values={"n": len(records)}, artifacts=artifacts)


def test_our_benchmarks_describe_plan_and_feedback_as_before_with_the_new_fields_at_their_defaults():
    benchmark = _Plain()
    described = describe(benchmark)
    assert (described.program_abi, described.step_seconds, described.episode_seconds) == ("", 0.0, 0.0)
    assert values.decode(described.metadata) == {}
    assert values.decode(described.observation_space) == {"type": "box", "shape": [2]}
    assert described.parameters_digest == values.digest(values.encode({"g": 9.8}))
    assert benchmark.plan("train", 3, 2) == [json.dumps({"seed": s}).encode() for s in sdk.plan_seeds("train", 3, 2)]
    response = build_feedback(benchmark, [])
    assert (response.score, values.decode(response.values)) == (1.5, {"n": 0})
    assert [(a.name, a.data, a.media_type, a.retention) for a in response.artifacts] == [
        ("episodes.csv", b"a,b\n", "", runner_pb2.ARTIFACT_RETENTION_PERMANENT),
        ("x/replay.gif", b"GIF", "image/gif", runner_pb2.ARTIFACT_RETENTION_BULK)]


# Their own packages, when a checkout (or the mirror of their repository) and compat/evopolicygym are here

MIRROR = Path("/work/.mirror/Linzwcs+EvoPolicyGym/repo")
# Their packages that import nothing but the standard library and parse under Python 3.11.
REFERENCE_PACKAGES = {
    "apple_incremental_game": "environments/atcoder/ahc058/apple_incremental_game",
    "warehouseman": "environments/codechef/june18/warehouseman",
}


@pytest.fixture(scope="module")
def reference_sources(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sources of REFERENCE_PACKAGES, copied from $EPG_EVOPOLICYGYM_CHECKOUT or the mirror's HEAD."""
    if not (COMPAT / "evopolicygym").is_dir():
        pytest.skip("their packages import evopolicygym: compat/evopolicygym is not in this repository yet")
    named = os.environ.get("EPG_EVOPOLICYGYM_CHECKOUT")
    root = Path(named) if named else MIRROR
    if not root.is_dir():
        pytest.skip(f"no checkout of EvoPolicyGym: set EPG_EVOPOLICYGYM_CHECKOUT to one (looked for {root})")
    destination = tmp_path_factory.mktemp("reference")
    for under in REFERENCE_PACKAGES.values():
        if (root / under / "src").is_dir():
            shutil.copytree(root / under / "src", destination, dirs_exist_ok=True)
        else:
            archive = subprocess.run(["git", "-C", str(root), "archive", "--format=tar", f"HEAD:{under}/src"], capture_output=True,
                                     check=True, timeout=120).stdout
            subprocess.run(["tar", "-x", "-C", str(destination)], input=archive, check=True, timeout=120)
    return destination


def _their_baseline(sources: Path, module: str, spec: Any) -> Any:
    """A fresh instance of the package's baseline Program, made with their PolicyContext."""
    from evopolicygym.policy import PolicyContext

    path = sources / module / "programs" / "baseline" / "policy.py"
    loader = importlib.util.spec_from_file_location(f"baseline_of_{module}", path)
    assert loader is not None and loader.loader is not None
    program = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(program)
    context = PolicyContext(observation_space=spec.observation_space, action_space=spec.action_space, metadata=spec.metadata,
                            environment_parameters=spec.environment_parameters, policy_seed=POLICY_SEED)
    return program.make_policy(context)


@pytest.mark.parametrize("module", sorted(REFERENCE_PACKAGES))
def test_their_package_served_by_the_runner_gives_the_feedback_their_own_records_give(module, reference_sources, start_runner, monkeypatch):
    from evopolicygym.authoring import EpisodeRecord, Transition

    monkeypatch.syspath_prepend(str(reference_sources))
    (row,) = discover(module)
    benchmark = load_benchmark(row["entry"])
    assert isinstance(benchmark, EvoPolicyGymBenchmark)
    theirs = benchmark.wrapped
    stub, exchange = start_runner(benchmark)
    episodes = stub.PlanEpisodes(runner_pb2.PlanRequest(split="validation", seed=3, count=2)).episodes
    records = [run_over_grpc(stub, exchange, episode, _their_baseline(reference_sources, module, theirs.spec).act)[0] for episode in episodes]
    assert [r.outcome for r in records] == [runner_pb2.RUNNER_OUTCOME_COMPLETED] * 2
    response = stub.BuildFeedback(runner_pb2.FeedbackRequest(records=records))

    direct = []
    for episode in theirs.episodes("validation", seed=3, count=2):
        environment, policy = theirs.make_environment(episode), _their_baseline(reference_sources, module, theirs.spec)
        initial = observation = environment.reset()
        transitions = []
        while not transitions or not transitions[-1].step.done:
            action = policy.act(observation)
            transitions.append(Transition(action=action, step=environment.step(action)))
            observation = transitions[-1].step.observation
        environment.close()
        direct.append(EpisodeRecord(episode=episode, policy_seed=POLICY_SEED, initial_observation=initial, transitions=tuple(transitions)))
    expected = theirs.feedback(tuple(direct))
    assert response.score == expected.score
    assert decode_exact(response.values) == expected.content
    assert sorted((a.name, a.media_type, a.data) for a in response.artifacts) == sorted((a.name, a.media_type, a.content) for a in expected.artifacts)


def test_profiles_sharing_one_id_are_listed_apart_the_first_keeping_it():
    from epg_sdk.evopolicygym.discovery import _with_unique_ids

    rows = [{"id": "minigrid/DoorKey-v0/mean-return-v1", "entry": "doorkey:DoorKey", "class": "DoorKey", "profile": "8x8"},
            {"id": "minigrid/DoorKey-v0/mean-return-v1", "entry": "doorkey:DoorKey?profile=5x5", "class": "DoorKey", "profile": "5x5"},
            {"id": "other/v1", "entry": "doorkey:Other", "class": "Other", "profile": None},
            {"id": "other/v1", "entry": "doorkey:Twin", "class": "Twin", "profile": None}]
    assert [row["id"] for row in _with_unique_ids(rows)] == [
        "minigrid/DoorKey-v0/mean-return-v1", "minigrid/DoorKey-v0/mean-return-v1@5x5", "other/v1", "other/v1@Twin"]
    assert [row["entry"] for row in _with_unique_ids(rows)] == [row["entry"] for row in rows]
