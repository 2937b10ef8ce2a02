"""The runner's side of one Episode: drive a policy over a framed socket against a fresh Environment.

Only the time spent waiting for the policy is charged to it: the clock stops
while the Environment steps. Every way the policy can misbehave ends in a
RunnerOutcome value; a fault of the Benchmark ends in ENVIRONMENT_ERROR.
"""

from __future__ import annotations

import re
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable

from epg.v1 import policy_pb2, runner_pb2
from epg_sdk.benchmark import Benchmark, EpisodeRecord, InvalidAction
from epg_sdk.protocol import values
from epg_sdk.protocol.framing import (
    SHARED_MIN_BYTES,
    DescriptorsRefused,
    FramedSocket,
    FrameTimeout,
    FramingError,
    PeerClosed,
    SharedMemoryError,
    SharedWriter,
)

SUMMARY_LIMIT_BYTES = 64 * 1024
EPISODE_ARTIFACTS_LIMIT_BYTES = 512 * 1024  # all of one Episode's artifacts together
# One Episode's evidence (its whole trajectory, frames included: 10,000 steps of 64x64 RGB take 123 MB); more is
# dropped and the summary says so.
EVIDENCE_LIMIT_BYTES = 256 * 1024 * 1024
# The runner's gRPC bounds. In: a BuildFeedback request carries every Episode's evidence, so it may take what a
# protobuf message can (2 GiB - 1). Out: an Episode record (its evidence plus bounded artifacts, summary and tails)
# or a Feedback (values of 1 MiB, artifacts of 512 MiB together). A Host's channel to the runner uses the same two.
RUNNER_RECEIVE_LIMIT_BYTES = 2**31 - 1
RUNNER_SEND_LIMIT_BYTES = 1024 * 1024 * 1024
# An artifact's name: a plain file name, or a relative POSIX path of them ("episode-000/replay.gif").
_ARTIFACT_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
ARTIFACT_NAME_MAX = 255
GOODBYE_WAIT_S = 1.0

_FAILURE_NAMES = {
    runner_pb2.FAILURE_CODE_EXCEPTION: "exception",
    runner_pb2.FAILURE_CODE_TIMEOUT: "timeout",
    runner_pb2.FAILURE_CODE_INVALID_ACTION: "invalid_action",
    runner_pb2.FAILURE_CODE_PROTOCOL_VIOLATION: "protocol_violation",
    runner_pb2.FAILURE_CODE_OUT_OF_MEMORY: "out_of_memory",
    runner_pb2.FAILURE_CODE_CRASHED: "crashed",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class EpisodeLimits:
    startup_deadline_s: float = 30.0
    step_deadline_s: float = 1.0
    episode_deadline_s: float = 300.0
    output_tail_bytes: int = 8192
    max_frame_bytes: int = 4 * 1024 * 1024

    @classmethod
    def from_proto(cls, message: runner_pb2.EpisodeLimits) -> EpisodeLimits:
        defaults = cls()
        return cls(
            startup_deadline_s=message.startup_deadline_s or defaults.startup_deadline_s,
            step_deadline_s=message.step_deadline_s or defaults.step_deadline_s,
            episode_deadline_s=message.episode_deadline_s or defaults.episode_deadline_s,
            output_tail_bytes=message.output_tail_bytes or defaults.output_tail_bytes,
            max_frame_bytes=message.max_frame_bytes or defaults.max_frame_bytes,
        )

    def to_proto(self) -> runner_pb2.EpisodeLimits:
        return runner_pb2.EpisodeLimits(
            startup_deadline_s=self.startup_deadline_s,
            step_deadline_s=self.step_deadline_s,
            episode_deadline_s=self.episode_deadline_s,
            output_tail_bytes=self.output_tail_bytes,
            max_frame_bytes=self.max_frame_bytes,
        )


class _PolicyFault(Exception):
    def __init__(self, outcome: runner_pb2.RunnerOutcome.ValueType, message: str, traceback_text: str = "", tail: bytes = b"") -> None:
        super().__init__(message)
        self.outcome = outcome
        self.message = message
        self.traceback_text = traceback_text
        self.tail = tail


class _EnvironmentFault(Exception):
    pass


def start_frame(benchmark: Benchmark, policy_seed: int, program_dir: str, tail_bytes: int) -> policy_pb2.PolicyFrame:
    spec = benchmark.spec
    program_abi = getattr(spec, "program_abi", "")
    metadata = getattr(spec, "metadata", {})
    encode = values.encode_exact if program_abi == values.POLICY_V2_ABI else values.encode  # policy/v2: tuples stay tuples
    frame = policy_pb2.PolicyFrame()
    start = frame.start
    start.abi_version = 1
    start.benchmark_id = spec.id
    start.observation_space.CopyFrom(encode(spec.observation_space))
    start.action_space.CopyFrom(encode(spec.action_space))
    start.parameters.CopyFrom(encode(spec.parameters))
    start.policy_seed = policy_seed
    start.program_dir = program_dir
    start.output_tail_bytes = tail_bytes
    start.program_abi = program_abi
    if metadata:  # none: our Benchmarks' Start stays what it was byte for byte
        start.metadata.CopyFrom(encode(dict(metadata)))
    return frame


class _Driver:
    """State of one Episode in progress."""

    def __init__(self, channel: FramedSocket, limits: EpisodeLimits, clock: Callable[[], float]) -> None:
        self.channel = channel
        self.limits = limits
        self.clock = clock
        self.policy_seconds = 0.0
        self.environment_seconds = 0.0
        self.shared: SharedWriter | None = None  # the Episode's shared memory, once the policy runtime took it

    def ask(self, frame: policy_pb2.PolicyFrame, budget_s: float, what: str, descriptors: tuple[int, ...] = ()) -> policy_pb2.RuntimeFrame:
        """Send frame (with descriptors), wait at most budget_s for the answer, charge the wait to the policy."""
        began = self.clock()
        deadline = began + budget_s
        try:
            self.channel.send(frame, deadline, descriptors)
            answer = self.channel.receive(policy_pb2.RuntimeFrame(), deadline)
        except FrameTimeout:
            self.policy_seconds += self.clock() - began
            raise _PolicyFault(runner_pb2.RUNNER_OUTCOME_POLICY_TIMEOUT, f"{what} took longer than {budget_s:.3g} s") from None
        except PeerClosed as exc:
            raise _PolicyFault(runner_pb2.RUNNER_OUTCOME_POLICY_DISCONNECTED, f"connection closed during {what}: {exc}") from None
        except FramingError as exc:
            raise _PolicyFault(runner_pb2.RUNNER_OUTCOME_PROTOCOL_VIOLATION, str(exc)) from None
        self.policy_seconds += self.clock() - began
        if answer.WhichOneof("kind") == "failure":
            failure = answer.failure
            outcome = (
                runner_pb2.RUNNER_OUTCOME_INVALID_ACTION
                if failure.fault == policy_pb2.POLICY_FAULT_ENCODE
                else runner_pb2.RUNNER_OUTCOME_POLICY_EXCEPTION
            )
            raise _PolicyFault(outcome, failure.message, failure.traceback, failure.output_tail)
        return answer

    def timed_step(self, environment: Any, action: Any, step: int) -> Any:
        """The Environment's step, its time not charged to the policy. An InvalidAction it raises is the policy's
        invalid action, as one from validate_action is; any other exception is the Environment's fault."""
        began = self.clock()
        try:
            return environment.step(action)
        except InvalidAction as exc:
            raise _PolicyFault(runner_pb2.RUNNER_OUTCOME_INVALID_ACTION, f"invalid action at step {step}: {exc}") from None
        except Exception as exc:
            raise _EnvironmentFault("".join(traceback.format_exception(exc))) from exc
        finally:
            self.environment_seconds += self.clock() - began

    def timed_environment(self, call: Callable[[], Any]) -> Any:
        began = self.clock()
        try:
            return call()
        except Exception as exc:
            raise _EnvironmentFault("".join(traceback.format_exception(exc))) from exc
        finally:
            self.environment_seconds += self.clock() - began


def drive_episode(
    benchmark: Benchmark,
    episode: runner_pb2.EpisodeSpec,
    channel: FramedSocket,
    limits: EpisodeLimits,
    policy_seed: int,
    program_dir: str,
    clock: Callable[[], float] = time.monotonic,
    shared_memory: bool = True,
) -> runner_pb2.EpisodeRecord:
    """Run one Episode of benchmark against the policy on channel; return its record.

    With shared_memory, an Episode whose first observation is a NumPy array of
    at least SHARED_MIN_BYTES offers the policy runtime a sealed memfd with
    Start, and sends such observations through it when the runtime takes it
    (Ready.shared_memory); otherwise, and for every other value, observations
    travel on the socket. Never raises for anything the policy does; a
    Benchmark exception becomes RUNNER_OUTCOME_ENVIRONMENT_ERROR with its traceback.
    """
    record = runner_pb2.EpisodeRecord(episode=episode, outcome=runner_pb2.RUNNER_OUTCOME_COMPLETED)
    driver = _Driver(channel, limits, clock)
    environment = None
    try:
        environment = driver.timed_environment(lambda: benchmark.make_environment(episode.payload))
        observation = driver.timed_environment(environment.reset)
        start = start_frame(benchmark, policy_seed, program_dir, limits.output_tail_bytes)
        offered = _offer_shared_memory(benchmark, observation, limits) if shared_memory else None
        try:
            if offered is not None:
                start.start.shared_memory_bytes = offered.size
            descriptors = (offered.fileno(),) if offered is not None else ()
            try:
                ready = driver.ask(start, limits.startup_deadline_s, "policy start-up (import and make_policy)", descriptors)
            except DescriptorsRefused:  # a sandbox whose kernel passes no descriptors: the socket alone
                offered.close()  # type: ignore[union-attr]  # only descriptors can be refused
                offered = None
                start.start.shared_memory_bytes = 0
                driver.policy_seconds = 0.0
                ready = driver.ask(start, limits.startup_deadline_s, "policy start-up (import and make_policy)")
            if ready.WhichOneof("kind") != "ready":
                raise _PolicyFault(runner_pb2.RUNNER_OUTCOME_PROTOCOL_VIOLATION, "expected Ready after Start")
            if offered is not None and ready.ready.shared_memory:
                driver.shared, offered = offered, None
        finally:
            if offered is not None:  # not taken (a runtime without shared memory), or the start-up failed
                offered.close()
        record.startup_seconds = driver.policy_seconds
        driver.policy_seconds = 0.0  # start-up has its own deadline
        loop_began = clock()
        try:
            _step_loop(benchmark, environment, observation, driver, record)
        finally:
            record.loop_seconds = clock() - loop_began
        _say_goodbye(driver, record)
    except _PolicyFault as fault:
        record.outcome = fault.outcome
        record.message = fault.message
        record.traceback = fault.traceback_text
        record.output_tail = fault.tail
    except _EnvironmentFault as fault:
        record.outcome = runner_pb2.RUNNER_OUTCOME_ENVIRONMENT_ERROR
        record.message = "the environment raised an exception"
        record.traceback = str(fault)
    finally:
        if driver.shared is not None:
            driver.shared.close()
    record.policy_seconds = driver.policy_seconds
    record.environment_seconds = driver.environment_seconds
    if environment is not None and record.outcome != runner_pb2.RUNNER_OUTCOME_ENVIRONMENT_ERROR:
        _attach_summary(environment, record, policy_seed)
    if environment is not None:
        try:
            environment.close()
        except Exception:  # a failing close must not hide the Episode's result
            record.traceback = record.traceback or traceback.format_exc()
    return record


def _offer_shared_memory(benchmark: Benchmark, observation: Any, limits: EpisodeLimits) -> SharedWriter | None:
    """A shared region the size of the first observation when it is a large tensor our ABI sends as it is, else None.

    Not for a Benchmark that encodes its observations itself (EvoPolicyGym's exact
    values), nor where the kernel refuses a memfd: those stay on the socket.
    """
    program_abi: str = getattr(benchmark.spec, "program_abi", "")
    if program_abi or getattr(benchmark, "encode_observation", None) is not None:
        return None
    if values.tensor_code(observation) is None or not SHARED_MIN_BYTES <= observation.nbytes <= limits.max_frame_bytes:
        return None
    try:
        return SharedWriter(observation.nbytes)
    except SharedMemoryError:
        return None


def _put_observation(frame: policy_pb2.PolicyFrame, observation: Any, shared: SharedWriter | None, encode_into: Callable[[Any, Any], None]) -> None:
    """Write the observation into frame: into the shared region when it is a tensor that fits, else as a Value."""
    if shared is not None:
        code = values.tensor_code(observation)
        if code is not None and observation.nbytes <= shared.size:
            reference = frame.observation.shared
            reference.dtype = code  # type: ignore[assignment]  # a DType value by construction
            reference.shape[:] = observation.shape
            reference.length = shared.write(observation)
            return
    try:
        encode_into(frame.observation.value, observation)
    except values.ValueCodecError as exc:
        raise _EnvironmentFault(f"observation cannot be encoded: {exc}") from exc


def _step_loop(benchmark: Benchmark, environment: Any, observation: Any, driver: _Driver, record: runner_pb2.EpisodeRecord) -> None:
    limits = driver.limits
    horizon = benchmark.spec.horizon
    # A Benchmark may encode observations and decode actions its own way (EvoPolicyGym's exact values, where a
    # tuple stays a tuple); ours take values.encode_into and values.decode.
    encode_into = getattr(benchmark, "encode_observation", None) or values.encode_into
    decode = getattr(benchmark, "decode_action", None) or values.decode
    validate = benchmark.validate_action
    total = 0.0
    steps = 0
    try:
        while steps < horizon:
            remaining = limits.episode_deadline_s - driver.policy_seconds
            if remaining <= 0:
                raise _PolicyFault(runner_pb2.RUNNER_OUTCOME_POLICY_TIMEOUT, f"the policy used its {limits.episode_deadline_s:.3g} s Episode deadline")
            # A fresh frame each step: one reused keeps every step's bytes in its protobuf arena until it is freed
            # (27 KiB a step for a 96x96x3 frame), and touching that new memory each step cost more than the rest.
            frame = policy_pb2.PolicyFrame()
            _put_observation(frame, observation, driver.shared, encode_into)
            frame.observation.step = steps
            budget = min(limits.step_deadline_s, remaining)
            what = "act()" if budget == limits.step_deadline_s else "act() (Episode deadline)"
            answer = driver.ask(frame, budget, what)
            if answer.WhichOneof("kind") != "action":
                raise _PolicyFault(runner_pb2.RUNNER_OUTCOME_PROTOCOL_VIOLATION, f"expected Action, got {answer.WhichOneof('kind')}")
            try:
                action = validate(decode(answer.action.value))
            except values.ValueCodecError as exc:
                raise _PolicyFault(runner_pb2.RUNNER_OUTCOME_PROTOCOL_VIOLATION, f"malformed action value: {exc}") from None
            except InvalidAction as exc:
                raise _PolicyFault(runner_pb2.RUNNER_OUTCOME_INVALID_ACTION, f"invalid action at step {steps}: {exc}") from None
            result = driver.timed_step(environment, action, steps)
            steps += 1
            total += result.reward
            observation = result.observation
            if result.terminated or result.truncated:
                record.terminated = result.terminated
                record.truncated = result.truncated
                break
        else:
            record.truncated = True
    finally:
        record.steps = steps
        record.total_reward = total


def _say_goodbye(driver: _Driver, record: runner_pb2.EpisodeRecord) -> None:
    """Ask the policy for its output tail; a policy that does not answer loses only its tail."""
    frame = policy_pb2.PolicyFrame()
    frame.stop.reason = "episode over"
    deadline = driver.clock() + GOODBYE_WAIT_S
    try:
        driver.channel.send(frame, deadline)
        answer = driver.channel.receive(policy_pb2.RuntimeFrame(), deadline)
    except (FrameTimeout, PeerClosed, FramingError):
        return
    if answer.WhichOneof("kind") == "goodbye":
        record.output_tail = answer.goodbye.output_tail[-driver.limits.output_tail_bytes:]


def _attach_summary(environment: Any, record: runner_pb2.EpisodeRecord, policy_seed: int = 0) -> None:
    """The Environment's summary, artifacts and evidence, bounded; a fault of any is said in the summary."""
    summary = getattr(environment, "summary", None)
    collected: dict[str, Any] = {}
    if summary is not None:
        try:
            collected = dict(summary())
        except Exception as exc:
            collected = {"summary_error": f"{type(exc).__name__}: {exc}"}
    artifacts, problem = _artifacts_of(environment)
    if problem:
        collected["artifacts_error"] = problem
    evidence, problem = _evidence_of(environment, policy_seed)
    if problem:
        collected["evidence_error"] = problem
    record.evidence = evidence
    if not collected:
        return
    try:
        encoded = values.encode(collected)
    except values.ValueCodecError as exc:
        encoded = values.encode({"summary_error": f"{type(exc).__name__}: {exc}"})
    if encoded.ByteSize() > SUMMARY_LIMIT_BYTES:
        encoded = values.encode({"summary_error": f"summary larger than {SUMMARY_LIMIT_BYTES} bytes was dropped"})
    record.summary.CopyFrom(encoded)
    record.artifacts.extend(runner_pb2.Artifact(name=name, data=data) for name, data in artifacts)


def artifact_name_problem(name: object) -> str:
    """Return "" for a good artifact name (a plain file name, or a relative POSIX path of them such as
    "episode-000/replay.gif"), else what is wrong with it: absolute, "..", ".", empty parts, a backslash, a NUL."""
    if not isinstance(name, str) or not name:
        return "an artifact name must be a non-empty string"
    if len(name) > ARTIFACT_NAME_MAX:
        return f"an artifact name takes at most {ARTIFACT_NAME_MAX} characters"
    if not all(_ARTIFACT_PART.fullmatch(part) for part in name.split("/")):
        return "an artifact name must be a relative POSIX path of plain file names"
    return ""


def _artifacts_of(environment: Any) -> tuple[list[tuple[str, bytes]], str]:
    """The Environment's artifacts (sorted by name) and "" or why none are kept."""
    method = getattr(environment, "artifacts", None)
    if method is None:
        return [], ""
    try:
        artifacts = dict(method())
    except Exception as exc:
        return [], f"{type(exc).__name__}: {exc}"
    bad = [name for name, data in artifacts.items() if artifact_name_problem(name) or not isinstance(data, bytes)]
    if bad:
        return [], f"artifact names must be plain file names (or relative paths of them) with bytes values: {sorted(map(repr, bad))[:3]}"
    size = sum(len(data) for data in artifacts.values())
    if size > EPISODE_ARTIFACTS_LIMIT_BYTES:
        return [], f"artifacts of {size} bytes, over {EPISODE_ARTIFACTS_LIMIT_BYTES}, were dropped"
    return sorted(artifacts.items()), ""


def _evidence_of(environment: Any, policy_seed: int) -> tuple[bytes, str]:
    """The Environment's evidence (its evidence(policy_seed=...) method, optional) and "" or why none is kept."""
    method = getattr(environment, "evidence", None)
    if method is None:
        return b"", ""
    try:
        evidence = method(policy_seed=policy_seed)
    except Exception as exc:
        return b"", f"{type(exc).__name__}: {exc}"
    if not isinstance(evidence, bytes):
        return b"", f"evidence must be bytes, not {type(evidence).__name__}"
    if len(evidence) > EVIDENCE_LIMIT_BYTES:
        return b"", f"evidence of {len(evidence)} bytes, over {EVIDENCE_LIMIT_BYTES}, was dropped"
    return evidence, ""


def feedback_records(records: Any) -> list[EpisodeRecord]:
    """Turn classified EpisodeRecord messages into the SDK's records, in order."""
    return [
        EpisodeRecord(
            index=r.episode.index,
            status="completed" if r.failure == runner_pb2.FAILURE_CODE_UNSPECIFIED else "policy_failure",
            failure=_FAILURE_NAMES.get(r.failure),
            steps=r.steps,
            total_reward=r.total_reward,
            terminated=r.terminated,
            truncated=r.truncated,
            summary=values.decode(r.summary) or {},
            artifacts={a.name: a.data for a in r.artifacts},
            evidence=r.evidence,
        )
        for r in records
    ]
