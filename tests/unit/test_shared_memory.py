"""Large observations through the Episode's shared memory: the region, the runtime's side and hostile peers, over socketpairs."""

from __future__ import annotations

import errno
import fcntl
import mmap
import os
import socket
import sys
import textwrap
import threading
import time
from typing import Any

import numpy as np
import pytest

from epg.v1 import policy_pb2, runner_pb2, values_pb2
from epg_sdk.benchmark import Benchmark, BenchmarkSpec, StepResult
from epg_sdk.protocol import values
from epg_sdk.protocol.framing import (
    MAX_SHARED_BYTES,
    FramedSocket,
    PeerClosed,
    SharedMemoryError,
    SharedReader,
    SharedWriter,
)
from epg_sdk.runtime import policy_runtime
from epg_sdk.runtime.episode_loop import EpisodeLimits, drive_episode

FRAME = np.arange(96 * 96 * 3, dtype=np.uint32).astype(np.uint8).reshape(96, 96, 3)
LIMITS = EpisodeLimits(step_deadline_s=10.0, startup_deadline_s=10.0, episode_deadline_s=60.0)


def open_descriptors() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


# The region


def test_a_tensor_written_by_the_runner_reads_back_equal_and_writable_on_the_runtime_side():
    writer = SharedWriter(FRAME.nbytes)
    reader = SharedReader(os.dup(writer.fileno()), writer.size)
    try:
        length = writer.write(FRAME)
        with reader.view(0, length) as data:
            array = values.decode_tensor_bytes(values_pb2.DTYPE_UINT8, FRAME.shape, data)
        assert array.flags.writeable and array.dtype == np.uint8
        np.testing.assert_array_equal(array, FRAME)
        writer.write(FRAME[::-1])  # the runner's next step does not change what the policy was given
        np.testing.assert_array_equal(array, FRAME)
    finally:
        reader.close()
        writer.close()


def test_a_big_endian_or_strided_array_is_written_little_endian_in_c_order():
    writer = SharedWriter(4096)
    reader = SharedReader(os.dup(writer.fileno()), writer.size)
    try:
        array = np.arange(512, dtype=">f8")[::2].reshape(16, 16)
        length = writer.write(array)
        with reader.view(0, length) as data:
            np.testing.assert_array_equal(values.decode_tensor_bytes(values_pb2.DTYPE_FLOAT64, (16, 16), data), array)
    finally:
        reader.close()
        writer.close()


def test_the_receiver_of_the_region_can_neither_write_resize_nor_reseal_it():
    writer = SharedWriter(8192)
    descriptor = os.dup(writer.fileno())
    try:
        if writer.write_protected:
            with pytest.raises(PermissionError):
                mmap.mmap(descriptor, 8192, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            with pytest.raises(PermissionError):
                os.pwrite(descriptor, b"x", 0)
        for size in (0, 4096, 16384):
            with pytest.raises(PermissionError):
                os.ftruncate(descriptor, size)
        with pytest.raises(PermissionError):
            fcntl.fcntl(descriptor, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE)
        writer.write(np.ones(8192, dtype=np.uint8))  # the runner's own mapping still writes
        assert os.pread(descriptor, 4, 0) == b"\x01" * 4
    finally:
        os.close(descriptor)
        writer.close()


def test_this_kernel_seals_the_region_against_the_receivers_writes():
    writer = SharedWriter(4096)
    try:
        assert writer.write_protected  # Linux >= 5.1: F_SEAL_FUTURE_WRITE
    finally:
        writer.close()


def test_a_region_mapped_by_the_runtime_is_read_only():
    writer = SharedWriter(4096)
    reader = SharedReader(os.dup(writer.fileno()), writer.size)
    try:
        with reader.view(0, 16) as data, pytest.raises(TypeError):
            data[0] = 1
    finally:
        reader.close()
        writer.close()


@pytest.mark.parametrize("size", [0, -1, MAX_SHARED_BYTES + 1])
def test_a_region_of_no_size_or_beyond_the_bound_is_refused_on_both_sides(size):
    with pytest.raises(SharedMemoryError):
        SharedWriter(size)
    read_end, write_end = os.pipe()
    os.close(write_end)
    with pytest.raises(SharedMemoryError):
        SharedReader(read_end, size)
    with pytest.raises(OSError):
        os.fstat(read_end)  # closed all the same


def test_a_descriptor_that_is_not_a_region_is_refused_and_closed(tmp_path):
    read_end, write_end = os.pipe()
    os.close(write_end)
    with pytest.raises(SharedMemoryError, match="not a region"):
        SharedReader(read_end, 4096)
    with pytest.raises(OSError):
        os.fstat(read_end)
    left, right = socket.socketpair()
    left.close()
    with pytest.raises(SharedMemoryError):
        SharedReader(right.detach(), 4096)


def test_a_region_of_another_size_than_announced_is_refused():
    writer = SharedWriter(4096)
    try:
        with pytest.raises(SharedMemoryError, match="not a region of 8192"):
            SharedReader(os.dup(writer.fileno()), 8192)
    finally:
        writer.close()


@pytest.mark.parametrize(("offset", "length"), [(0, 4097), (4096, 1), (4000, 200), (-1, 10), (2**63, 2**63), (0, -5)])
def test_a_reference_outside_the_region_is_refused(offset, length):
    writer = SharedWriter(4096)
    reader = SharedReader(os.dup(writer.fileno()), writer.size)
    try:
        with pytest.raises(SharedMemoryError, match="outside"):
            reader.view(offset, length)
    finally:
        reader.close()
        writer.close()


@pytest.mark.parametrize(("code", "shape"), [(values_pb2.DTYPE_UINT8, (10, 10)), (values_pb2.DTYPE_FLOAT64, (65,)),
                                             (99, (512,)), (values_pb2.DTYPE_UINT8, (-512, -1)), (values_pb2.DTYPE_UINT8, (1,) * 40)])
def test_a_shape_or_dtype_that_does_not_match_the_bytes_is_a_codec_error(code, shape):
    data = memoryview(bytes(512))
    with pytest.raises(values.ValueCodecError):
        values.decode_tensor_bytes(code, shape, data)


# The runtime's side


@pytest.fixture
def runtime(monkeypatch, tmp_path):
    """policy_runtime.serve in a thread on one end of a socketpair, a Program answering the sum of its observation."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "policy", None)
    program = tmp_path / "program"
    program.mkdir()
    (program / "policy.py").write_text(textwrap.dedent("""
        class Sum:
            def act(self, observation):
                observation[...] = 0 if observation.flags.writeable else observation  # a writable copy, as promised
                return int(observation.size)

        def make_policy(context):
            return Sum()
    """))
    runner_end, runtime_end = socket.socketpair()
    runtime_channel = FramedSocket(runtime_end)
    errors: list[BaseException] = []

    def serve() -> None:
        try:
            policy_runtime.serve(runtime_channel, policy_runtime.OutputTail(4096))
        except PeerClosed:
            pass
        except BaseException as exc:  # what the runtime process would die of
            errors.append(exc)
            runtime_channel.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    channel = FramedSocket(runner_end)
    yield channel, str(program), errors
    channel.close()
    thread.join(10)
    runtime_channel.close()
    assert not thread.is_alive()


def start(program_dir: str, shared_bytes: int = 0) -> policy_pb2.PolicyFrame:
    frame = policy_pb2.PolicyFrame()
    frame.start.program_dir = program_dir
    frame.start.shared_memory_bytes = shared_bytes
    return frame


def ask(channel: FramedSocket, frame: policy_pb2.PolicyFrame, descriptors: tuple[int, ...] = ()) -> policy_pb2.RuntimeFrame:
    deadline = time.monotonic() + 30
    channel.send(frame, deadline, descriptors)
    return channel.receive(policy_pb2.RuntimeFrame(), deadline)


def shared_observation(offset: int, length: int, shape: tuple[int, ...]) -> policy_pb2.PolicyFrame:
    frame = policy_pb2.PolicyFrame()
    frame.observation.shared.dtype = values_pb2.DTYPE_UINT8
    frame.observation.shared.shape[:] = shape
    frame.observation.shared.offset = offset
    frame.observation.shared.length = length
    return frame


def test_the_runtime_takes_the_region_offered_with_start_and_reads_observations_from_it(runtime):
    channel, program, errors = runtime
    writer = SharedWriter(FRAME.nbytes)
    try:
        ready = ask(channel, start(program, writer.size), (writer.fileno(),))
        assert ready.ready.shared_memory
        writer.write(FRAME)
        answer = ask(channel, shared_observation(0, FRAME.nbytes, FRAME.shape))
        assert answer.action.value.int64 == FRAME.size
        assert ask(channel, shared_observation(0, 64, (8, 8))).action.value.int64 == 64
    finally:
        writer.close()
    assert errors == []


@pytest.mark.parametrize("offered", ["no size", "a pipe", "the wrong size"])
def test_a_runtime_declines_a_region_it_cannot_map_and_takes_observations_on_the_socket(runtime, offered):
    channel, program, errors = runtime
    writer = SharedWriter(8192)
    read_end, write_end = os.pipe()
    try:
        descriptor, size = {"no size": (writer.fileno(), 0), "a pipe": (read_end, 8192), "the wrong size": (writer.fileno(), 4096)}[offered]
        ready = ask(channel, start(program, size), (descriptor,))
        assert ready.WhichOneof("kind") == "ready" and not ready.ready.shared_memory
        frame = policy_pb2.PolicyFrame()
        frame.observation.value.CopyFrom(values.encode(FRAME))
        assert ask(channel, frame).action.value.int64 == FRAME.size
    finally:
        writer.close()
        os.close(read_end)
        os.close(write_end)
    assert errors == []


def test_a_runtime_drops_every_descriptor_that_came_with_start_beyond_the_region(runtime):
    channel, program, errors = runtime
    writer = SharedWriter(8192)
    pipes = [os.pipe() for _ in range(3)]
    try:
        ready = ask(channel, start(program, 8192), (writer.fileno(), *(w for _, w in pipes)))
        assert ready.ready.shared_memory
        for read_end, _ in pipes:
            os.set_blocking(read_end, False)
        for read_end, write_end in pipes:
            os.close(write_end)
            assert os.read(read_end, 1) == b""  # end of file: no copy of the write end is left open in the runtime
    finally:
        writer.close()
        for read_end, _ in pipes:
            os.close(read_end)
    assert errors == []


@pytest.mark.parametrize(("offset", "length", "shape"), [(0, 8193, (8193,)), (8000, 400, (400,)), (0, 100, (10, 11))])
def test_a_shared_reference_outside_the_region_or_its_shape_ends_the_runtime(runtime, offset, length, shape):
    channel, program, errors = runtime
    writer = SharedWriter(8192)
    try:
        assert ask(channel, start(program, writer.size), (writer.fileno(),)).ready.shared_memory
        with pytest.raises(PeerClosed):
            ask(channel, shared_observation(offset, length, shape))
    finally:
        writer.close()
    assert len(errors) == 1 and isinstance(errors[0], (SharedMemoryError, values.ValueCodecError))


def test_a_shared_observation_without_a_region_ends_the_runtime(runtime):
    channel, program, errors = runtime
    assert not ask(channel, start(program)).ready.shared_memory
    with pytest.raises(PeerClosed):
        ask(channel, shared_observation(0, 64, (64,)))
    assert len(errors) == 1 and isinstance(errors[0], SharedMemoryError)


# The runner's side against peers that do not play along


class _Still:
    def __init__(self, observation: Any) -> None:
        self.observation = observation

    def reset(self) -> Any:
        return self.observation

    def step(self, action: Any) -> StepResult:
        return StepResult(observation=self.observation, reward=1.0, terminated=False)

    def summary(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        pass


class _StillBenchmark(Benchmark):
    def __init__(self, observation: Any, horizon: int = 5) -> None:
        self.observation = observation
        self._spec = BenchmarkSpec(id="Still-v0", description="", observation_space={"type": "box"},
                                   action_space={"type": "discrete", "n": 2}, horizon=horizon, failure_return=0.0)

    @property
    def spec(self) -> BenchmarkSpec:
        return self._spec

    def make_environment(self, payload: bytes) -> _Still:
        return _Still(self.observation)

    def validate_action(self, action: Any) -> Any:
        return action


def drive_against(peer, observation: Any = FRAME, shared_memory: bool = True) -> runner_pb2.EpisodeRecord:
    """Drive an Episode against peer(FramedSocket) running in a thread; return the record."""
    runner_end, peer_end = socket.socketpair()
    peer_channel = FramedSocket(peer_end)
    thread = threading.Thread(target=peer, args=(peer_channel,), daemon=True)
    thread.start()
    channel = FramedSocket(runner_end)
    try:
        return drive_episode(_StillBenchmark(observation), runner_pb2.EpisodeSpec(index=0), channel, LIMITS, 1, "/p",
                             shared_memory=shared_memory)
    finally:
        channel.close()
        thread.join(10)
        peer_channel.close()


def scripted_peer(seen: list[Any], ready_shared: bool = False, extra_descriptor: bool = False, take_descriptors: bool = True):
    """A policy runtime that answers 0 and records each PolicyFrame's kind, descriptors and observation form."""

    def peer(channel: FramedSocket) -> None:
        try:
            if take_descriptors:
                frame, descriptors = channel.receive_with_descriptors(policy_pb2.PolicyFrame())
                seen.append(("start", len(descriptors), frame.start.shared_memory_bytes))
                for descriptor in descriptors:
                    os.close(descriptor)
            else:
                frame = channel.receive(policy_pb2.PolicyFrame())  # an old runtime: no room for descriptors
                seen.append(("start", 0, frame.start.shared_memory_bytes))
            ready = policy_pb2.RuntimeFrame()
            ready.ready.shared_memory = ready_shared
            read_end, write_end = os.pipe()
            channel.send(ready, descriptors=(read_end, write_end) if extra_descriptor else ())
            os.close(read_end)
            os.close(write_end)
            while True:
                frame = channel.receive(policy_pb2.PolicyFrame())
                if frame.WhichOneof("kind") != "observation":
                    break
                seen.append("shared" if frame.observation.HasField("shared") else frame.observation.value.WhichOneof("kind"))
                answer = policy_pb2.RuntimeFrame()
                answer.action.value.int64 = 0
                channel.send(answer, descriptors=(channel.socket.fileno(),) if extra_descriptor else ())
            goodbye = policy_pb2.RuntimeFrame()
            goodbye.goodbye.SetInParent()
            channel.send(goodbye)
        except PeerClosed:
            pass

    return peer


def test_an_old_runtime_that_never_takes_the_region_gets_every_observation_on_the_socket():
    seen: list[Any] = []
    before = open_descriptors()
    record = drive_against(scripted_peer(seen, take_descriptors=False))
    assert record.outcome == runner_pb2.RUNNER_OUTCOME_COMPLETED and record.steps == 5
    assert seen == [("start", 0, FRAME.nbytes)] + ["tensor"] * 5
    assert open_descriptors() <= before  # the region the runtime did not take is closed


def test_a_runtime_that_takes_the_region_gets_large_observations_through_it():
    seen: list[Any] = []
    record = drive_against(scripted_peer(seen, ready_shared=True))
    assert record.outcome == runner_pb2.RUNNER_OUTCOME_COMPLETED
    assert seen == [("start", 1, FRAME.nbytes)] + ["shared"] * 5


def test_small_observations_and_a_forced_socket_path_offer_no_region():
    for observation, shared_memory in ((np.zeros(17), True), (FRAME, False), ({"image": FRAME}, True)):
        seen: list[Any] = []
        record = drive_against(scripted_peer(seen, ready_shared=True), observation, shared_memory)
        assert record.outcome == runner_pb2.RUNNER_OUTCOME_COMPLETED
        assert seen[0] == ("start", 0, 0)
        assert "shared" not in seen


def test_descriptors_a_runtime_sends_to_the_runner_are_dropped_and_the_episode_goes_on():
    seen: list[Any] = []
    before = open_descriptors()
    record = drive_against(scripted_peer(seen, ready_shared=True, extra_descriptor=True))
    assert record.outcome == runner_pb2.RUNNER_OUTCOME_COMPLETED and record.steps == 5
    assert open_descriptors() <= before


def test_a_runtime_that_claims_a_region_it_was_not_offered_gets_observations_on_the_socket():
    seen: list[Any] = []
    record = drive_against(scripted_peer(seen, ready_shared=True), np.zeros(17))
    assert record.outcome == runner_pb2.RUNNER_OUTCOME_COMPLETED
    assert seen[1:] == ["tensor"] * 5


def test_a_runtime_that_dies_at_start_up_leaves_no_region_open():
    before = open_descriptors()

    def dies(channel: FramedSocket) -> None:
        _, descriptors = channel.receive_with_descriptors(policy_pb2.PolicyFrame())
        for descriptor in descriptors:
            os.close(descriptor)
        channel.socket.shutdown(socket.SHUT_RDWR)

    record = drive_against(dies)
    assert record.outcome == runner_pb2.RUNNER_OUTCOME_POLICY_DISCONNECTED
    assert open_descriptors() <= before


def test_a_truncated_or_oversized_answer_after_the_region_was_taken_is_classified_as_today():
    for garbage, outcome in ((b"\x05\x00\x00\x00\x0f\xff", runner_pb2.RUNNER_OUTCOME_POLICY_DISCONNECTED),
                             (b"\xff\xff\xff\x7f", runner_pb2.RUNNER_OUTCOME_PROTOCOL_VIOLATION),
                             (b"\x03\x00\x00\x00\x0f\xff\xff", runner_pb2.RUNNER_OUTCOME_PROTOCOL_VIOLATION)):

        def peer(channel: FramedSocket, garbage: bytes = garbage) -> None:
            _, descriptors = channel.receive_with_descriptors(policy_pb2.PolicyFrame())
            for descriptor in descriptors:
                os.close(descriptor)
            ready = policy_pb2.RuntimeFrame()
            ready.ready.shared_memory = True
            channel.send(ready)
            channel.receive(policy_pb2.PolicyFrame())
            channel.socket.sendall(garbage)
            channel.socket.shutdown(socket.SHUT_WR)

        record = drive_against(peer)
        assert record.outcome == outcome, (garbage, record.message)


class _NoDescriptors(socket.socket):
    """A Unix socket whose kernel refuses SCM_RIGHTS, as a sandbox emulating the kernel may."""

    def sendmsg(self, buffers, ancdata=(), *args):  # type: ignore[override]
        if ancdata:
            raise OSError(errno.EOPNOTSUPP, "descriptors cannot be passed here")
        return super().sendmsg(buffers, ancdata, *args)


def test_a_socket_that_cannot_pass_descriptors_runs_the_episode_on_the_socket_alone():
    seen: list[Any] = []
    runner_end, peer_end = socket.socketpair()
    refusing = _NoDescriptors(runner_end.family, runner_end.type, fileno=runner_end.detach())
    peer_channel = FramedSocket(peer_end)
    thread = threading.Thread(target=scripted_peer(seen, ready_shared=True), args=(peer_channel,), daemon=True)
    thread.start()
    before = open_descriptors()
    channel = FramedSocket(refusing)
    try:
        record = drive_episode(_StillBenchmark(FRAME), runner_pb2.EpisodeSpec(index=0), channel, LIMITS, 1, "/p")
    finally:
        channel.close()
        thread.join(10)
        peer_channel.close()
    assert record.outcome == runner_pb2.RUNNER_OUTCOME_COMPLETED and record.steps == 5
    assert seen == [("start", 0, 0)] + ["tensor"] * 5
    assert open_descriptors() <= before | {str(refusing.fileno())}
