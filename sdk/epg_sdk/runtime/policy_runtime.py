"""The policy runtime: runs inside the policy container and serves one Episode.

It connects to the runner's socket, waits for Start, imports the Program's
`policy.py`, calls `make_policy(context)` once and then `act(observation)` per
step. Frames travel over the socket, never over stdout: the policy's own
stdout and stderr go to a bounded in-memory tail reported to the runner.

Two Program ABIs, chosen by Start.program_abi: "" (ours: NumPy values, our
PolicyContext) and "policy/v2" (EvoPolicyGym 0.3: exact Python values in and
out, `evopolicygym.policy.PolicyContext`; an action that is not an exact value
is reported as POLICY_FAULT_ENCODE, the runner's invalid action).

Imports: the standard library, NumPy, protobuf, epg_sdk.protocol only
(`evopolicygym.policy`, for policy/v2 only, when a Start asks for it).

Start-up is on the critical path of every cold Episode, so the runtime loads
only what every Episode needs, with the garbage collector off while modules
load (when run as a program, never on import). What a Program may not need
(NumPy's random module, pathlib, traceback) is loaded while a pooled runtime
waits for its Episode, or on first use.
"""

from __future__ import annotations

import gc

if __name__ == "__main__":
    gc.disable()  # no collections while ~230 modules load: ~10 ms less CPU per container; on again before the Program

import importlib.util
import io
import os
import select
import signal
import socket
import sys
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from epg.v1 import policy_pb2 as pb
from epg_sdk.protocol import values
from epg_sdk.protocol.framing import STEP_SPIN, FramedSocket, PeerClosed, SharedMemoryError, SharedReader

if TYPE_CHECKING:
    from pathlib import Path

CONNECT_TIMEOUT_S = 120.0
DEFAULT_TAIL_BYTES = 8192


class OutputTail(io.TextIOBase):
    """A text stream that keeps only the last `limit` characters written to it."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._chunks: list[str] = []
        self._size = 0

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self._chunks.append(text)
        self._size += len(text)
        if self._size > 2 * self._limit + 4096:
            self._compact()
        return len(text)

    def _compact(self) -> None:
        joined = "".join(self._chunks)[-self._limit:]
        self._chunks = [joined]
        self._size = len(joined)

    def set_limit(self, limit: int) -> None:
        self._limit = limit
        self._compact()

    def tail(self) -> bytes:
        self._compact()
        if not self._chunks:
            return b""
        cut = self._chunks[0].encode("utf-8", "replace")[-self._limit:]
        return cut.decode("utf-8", "ignore").encode()  # never start inside a character


# When Start is not there this soon after connecting, the runtime is pooled and
# has time to load the optional modules before its Episode.
WARM_UP_AFTER_S = 0.05


def warm_up() -> None:
    """Import what a Program may need beyond what every Episode does (done once by a zygote, before it forks)."""
    import pathlib  # noqa: F401
    import traceback  # noqa: F401

    import numpy.random  # noqa: F401


class PolicyContext:
    """What make_policy(context) receives. `rng` and `program_dir` are made on first use."""

    __slots__ = ("benchmark_id", "observation_space", "action_space", "parameters", "seed", "_program_dir", "_rng")

    def __init__(
        self,
        *,
        benchmark_id: str,
        observation_space: dict[str, Any],
        action_space: dict[str, Any],
        parameters: dict[str, Any],
        seed: int,
        program_dir: str,
    ) -> None:
        self.benchmark_id = benchmark_id
        self.observation_space = observation_space
        self.action_space = action_space
        self.parameters = parameters
        self.seed = seed
        self._program_dir: str | Path = program_dir
        self._rng: np.random.Generator | None = None

    @property
    def program_dir(self) -> Path:
        """The Program's directory (read-only), a pathlib.Path."""
        if isinstance(self._program_dir, str):
            from pathlib import Path

            self._program_dir = Path(self._program_dir)
        return self._program_dir

    @property
    def rng(self) -> np.random.Generator:
        """A NumPy Generator seeded with `seed`: the same numbers for the same Episode."""
        if self._rng is None:
            self._rng = np.random.default_rng(self.seed)
        return self._rng

    def __repr__(self) -> str:
        return f"PolicyContext(benchmark_id={self.benchmark_id!r}, seed={self.seed}, program_dir={str(self._program_dir)!r})"


def connect(path: str, timeout_s: float = CONNECT_TIMEOUT_S) -> socket.socket:
    """Connect to the unix socket at path, retrying while it is not there yet, for at most timeout_s."""
    deadline = time.monotonic() + timeout_s
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)
            return sock
        except (FileNotFoundError, ConnectionRefusedError):
            sock.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def _exact_context(start: pb.Start) -> Any:
    """The `evopolicygym.policy.PolicyContext` of a policy/v2 Program, its values decoded exactly.

    Raises ValueCodecError for a value that is not exact, ImportError when evopolicygym is missing.
    """
    context_class = importlib.import_module("evopolicygym.policy").PolicyContext
    mappings = {}
    for name in ("metadata", "parameters"):
        mapping = values.decode_exact(getattr(start, name)) if start.HasField(name) else {}
        if type(mapping) is not dict:
            raise values.ValueCodecError(f"Start.{name} of a policy/v2 Program must be a map, not {type(mapping).__name__}")
        mappings[name] = mapping
    return context_class(
        observation_space=values.decode_exact(start.observation_space),
        action_space=values.decode_exact(start.action_space),
        metadata=mappings["metadata"],
        environment_parameters=mappings["parameters"],
        policy_seed=start.policy_seed,
    )


def _load_policy(start: pb.Start) -> Any:
    program_dir = start.program_dir
    if start.program_abi not in ("", values.POLICY_V2_ABI):
        raise ValueError(f"this runtime does not speak the Program ABI {start.program_abi!r}")
    # Made before the Program's code runs: importing policy.py cannot replace the PolicyContext class first.
    exact_context = _exact_context(start) if start.program_abi == values.POLICY_V2_ABI else None
    os.chdir(program_dir)
    sys.path.insert(0, program_dir)
    source = os.path.join(program_dir, "policy.py")
    spec = importlib.util.spec_from_file_location("policy", source)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {source}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["policy"] = module
    spec.loader.exec_module(module)
    make_policy = getattr(module, "make_policy", None)
    if not callable(make_policy):
        raise AttributeError("policy.py does not define a callable make_policy(context)")
    context = exact_context if exact_context is not None else PolicyContext(
        benchmark_id=start.benchmark_id,
        observation_space=values.decode(start.observation_space),
        action_space=values.decode(start.action_space),
        parameters=values.decode(start.parameters) or {},
        seed=start.policy_seed,
        program_dir=program_dir,
    )
    policy = make_policy(context)
    if not callable(getattr(policy, "act", None)):
        raise AttributeError("make_policy(context) returned an object without an act(observation) method")
    return policy


def _failure(fault: pb.PolicyFault.ValueType, exc: BaseException, tail: OutputTail) -> pb.RuntimeFrame:
    import traceback

    frame = pb.RuntimeFrame()
    frame.failure.fault = fault
    frame.failure.message = f"{type(exc).__name__}: {exc}"
    frame.failure.traceback = "".join(traceback.format_exception(exc))
    frame.failure.output_tail = tail.tail()
    return frame


def _map_shared_memory(start: pb.PolicyFrame, descriptors: list[int]) -> SharedReader | None:
    """The runner's shared memory mapped read-only, when Start offered it with one descriptor; else None.

    Every descriptor that came with Start is closed, mapped or not. A region
    that cannot be mapped is declined (Ready.shared_memory stays false), and
    the runner sends every observation on the socket.
    """
    size = start.start.shared_memory_bytes if start.WhichOneof("kind") == "start" else 0
    for extra in descriptors[1:]:
        os.close(extra)
    if not descriptors:
        return None
    if not size or start.start.program_abi:
        os.close(descriptors[0])
        return None
    try:
        return SharedReader(descriptors[0], size)  # closes the descriptor
    except SharedMemoryError:
        return None


def _observation(observation: pb.Observation, decode: Any, shared: SharedReader | None) -> Any:
    """The observation of a frame: a copy of its tensor in shared memory, or its decoded value.

    Raises ValueCodecError for a malformed value, SharedMemoryError for a
    shared tensor without shared memory or outside it.
    """
    if not observation.HasField("shared"):
        return decode(observation.value)
    if shared is None:
        raise SharedMemoryError("a shared observation, but no shared memory was mapped")
    tensor = observation.shared
    with shared.view(tensor.offset, tensor.length) as data:
        return values.decode_tensor_bytes(tensor.dtype, tensor.shape, data)


def serve(channel: FramedSocket, tail: OutputTail) -> int:
    """Serve one Episode on channel. Returns the process exit status."""
    if not select.select([channel.socket], [], [], WARM_UP_AFTER_S)[0]:
        warm_up()
    start, descriptors = channel.receive_with_descriptors(pb.PolicyFrame())
    gc.enable()
    shared = _map_shared_memory(start, descriptors)  # before the Program runs: no descriptor of it stays open
    if start.WhichOneof("kind") != "start":
        return 3
    tail.set_limit(start.start.output_tail_bytes or DEFAULT_TAIL_BYTES)
    try:
        policy = _load_policy(start.start)
    except BaseException as exc:  # the Program's fault, reported as a value
        channel.send(_failure(pb.POLICY_FAULT_LOAD, exc, tail))
        return 0
    ready = pb.RuntimeFrame()
    ready.ready.SetInParent()
    ready.ready.shared_memory = shared is not None
    channel.send(ready)

    act = policy.act
    if start.start.program_abi == values.POLICY_V2_ABI:
        decode, encode_into = values.decode_exact, values.encode_exact_into
    else:
        decode, encode_into = values.decode, values.encode_into
    while True:
        # Fresh messages each step: a reused one keeps every frame parsed into it in its arena until it is freed.
        incoming = channel.receive(pb.PolicyFrame())
        kind = incoming.WhichOneof("kind")
        if kind != "observation":
            goodbye = pb.RuntimeFrame()
            goodbye.goodbye.output_tail = tail.tail()
            channel.send(goodbye)
            return 0
        observation = _observation(incoming.observation, decode, shared)
        try:
            action = act(observation)
        except BaseException as exc:
            channel.send(_failure(pb.POLICY_FAULT_ACT, exc, tail))
            return 0
        answer = pb.RuntimeFrame()
        try:
            encode_into(answer.action.value, action)
        except Exception as exc:
            channel.send(_failure(pb.POLICY_FAULT_ENCODE, exc, tail))
            return 0
        channel.send(answer)


def linger() -> None:
    """Stop every other process of this container, then wait to be removed.

    Only inside a policy container (PID namespace, docker-init as PID 1): a
    container that exits makes the engine work while other Episodes run, so a
    used container stays, idle, until the Host removes it between batches.
    """
    if os.getppid() != 1:
        raise RuntimeError("--linger is only for the policy container (docker-init as parent)")
    try:
        os.kill(-1, signal.SIGKILL)  # every process we may signal in this PID namespace, but us and init
    except (ProcessLookupError, PermissionError):
        pass
    while True:
        signal.pause()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    lingering = "--linger" in args
    args = [a for a in args if a != "--linger"]
    if len(args) != 1:
        print("usage: python -m epg_sdk.runtime.policy_runtime [--linger] SOCKET_PATH", file=sys.__stderr__)
        return 2
    sock = connect(args[0])
    try:
        return serve_connected(sock)
    finally:
        if lingering:
            linger()


def serve_connected(sock: socket.socket) -> int:
    """Serve one Episode on sock, connected to the runner's slot socket, the policy's stdout and stderr going to the
    runtime's tail (the protocol never uses stdout: the policy may print freely). Returns the exit status."""
    channel = FramedSocket(sock, spin=STEP_SPIN)
    tail = OutputTail(DEFAULT_TAIL_BYTES)
    sys.stdout = sys.stderr = tail
    try:
        return serve(channel, tail)
    except PeerClosed:
        return 0
    finally:
        channel.close()


if __name__ == "__main__":
    sys.exit(main())
