"""An EvoPolicyGym 0.3 Benchmark served as one of ours: spec, planning, Environments that record evidence, Feedback.

Their Benchmark is structural (`spec`, `episodes(split, *, seed, count)`,
`make_environment(EpisodeSpec)`, `feedback(records)`); `EvoPolicyGymBenchmark`
wraps one so that the runner serves it unchanged. Each Episode's Environment
records the whole trajectory and hands it to the runner as the Episode's
evidence; `feedback` turns every record's evidence back into their
`EpisodeRecord` and calls their `feedback`. `evopolicygym` itself is imported
only when a Benchmark is wrapped: an image without it never loads it.
"""

from __future__ import annotations

import importlib
import math
import struct
import zlib
from collections.abc import Mapping
from typing import Any

from epg.v1 import values_pb2 as pb
from epg_sdk.benchmark import Artifact, Benchmark, BenchmarkSpec, Environment, EpisodeRecord, Feedback, InvalidAction, StepResult
from epg_sdk.evopolicygym.exact import decode_exact, encode_exact
from epg_sdk.protocol.values import ValueCodecError

PROGRAM_ABI = "policy/v2"
EVIDENCE_FORMAT = "epg-evidence/v2"
# Evidence is a zlib stream, compressed as the Episode goes (level 1: frames of a game shrink 10 to 50 times at a
# few hundred MB/s); what it may grow back to when the runner reads it for their feedback is bounded too.
EVIDENCE_COMPRESSION_LEVEL = 1
EVIDENCE_DECODED_LIMIT_BYTES = 1 << 30
# What their feedback sees for each of our failure codes. Their kernel knows four: a policy process that dies
# without answering (killed for memory, crashed) is a "protocol_error" there, so out_of_memory and crashed map to it.
FAILURE_CODES: dict[str, str] = {
    "exception": "exception",
    "timeout": "timeout",
    "invalid_action": "invalid_action",
    "protocol_violation": "protocol_error",
    "out_of_memory": "protocol_error",
    "crashed": "protocol_error",
}
# Where their packages state what a failed Episode scores, in the order they are looked for (metadata first).
FAILURE_KEYS = ("failure_return", "failure_score", "policy_failure_return", "failure_cost")
_LENGTH = struct.Struct(">I")


class EvidenceError(ValueError):
    """An Episode's evidence is missing, over its bound or malformed: their feedback cannot be built from it."""


def is_structural_benchmark(obj: object) -> bool:
    """Return True when obj has the structural interface of an EvoPolicyGym Benchmark and is not one of ours."""
    if isinstance(obj, Benchmark) or isinstance(obj, type):
        return False
    methods = all(callable(getattr(type(obj), name, None)) for name in ("episodes", "make_environment", "feedback"))
    return methods and (hasattr(type(obj), "spec") or hasattr(obj, "spec"))


class EvoPolicyGymBenchmark(Benchmark):
    """One of their Benchmark objects as our Benchmark.

    The spec is read once; step_seconds and episode_seconds (0.0: the Host's) are ours to choose, as their
    spec carries no time limits.
    """

    def __init__(self, benchmark: Any, *, step_seconds: float = 0.0, episode_seconds: float = 0.0) -> None:
        if not is_structural_benchmark(benchmark):
            raise TypeError(f"{type(benchmark).__name__} is not an EvoPolicyGym Benchmark (spec, episodes, make_environment, feedback)")
        self.wrapped = benchmark
        self._types = _their_types()
        self._spec = _our_spec(benchmark, step_seconds=step_seconds, episode_seconds=episode_seconds)

    @property
    def spec(self) -> BenchmarkSpec:
        return self._spec

    def plan(self, split: str, seed: int, count: int) -> list[bytes]:
        """Return their Episodes of split planned with exactly this seed and count, each encoded losslessly.

        Raises ValueError when their planning refuses the request or plans another number of Episodes.
        """
        planned = tuple(self.wrapped.episodes(split, seed=seed, count=count))
        if len(planned) != count:
            raise ValueError(f"the Benchmark planned {len(planned)} Episodes, not {count}")
        return [encode_episode(episode) for episode in planned]

    def make_environment(self, payload: bytes) -> Environment:
        episode = decode_episode(payload, self._types)
        return RecordingEnvironment(self.wrapped.make_environment(episode), payload, self._types)

    def validate_action(self, action: Any) -> Any:
        """Their Environment validates actions in step (raising InvalidAction there): the action passes as sent."""
        return action

    def encode_observation(self, value: pb.Value, observation: Any) -> None:
        """Overwrite value with the observation, exactly (tuples stay tuples). Raises ValueCodecError."""
        value.CopyFrom(encode_exact(observation))

    def decode_action(self, value: pb.Value) -> Any:
        """The action exactly as the policy sent it (tuples, TensorValue, unsigned 64-bit integers).

        Raises ValueCodecError (the policy's protocol violation) for what is not one of their values, as their
        `copy_policy_value` judges it: a NaN or an infinity, a tensor whose data disagrees with its shape.
        """
        action = decode_exact(value)
        try:
            return self._types.copy_policy_value(action)
        except (TypeError, ValueError) as exc:
            raise ValueCodecError(f"the action is not an exact value: {exc}") from None

    def feedback(self, records: list[EpisodeRecord]) -> Feedback:
        """Their Feedback over the records' evidence: score, their content as values (a content that is not a
        mapping is given as {"content": content}), their artifacts with path names, media types and retention.

        Raises EvidenceError when a record's evidence cannot give their EpisodeRecord.
        """
        theirs = tuple(self._their_record(record) for record in records)
        result = self.wrapped.feedback(theirs)
        content = result.content
        content_values = dict(content) if isinstance(content, Mapping) else {"content": content}
        artifacts = {a.name: Artifact(bytes(a.content), media_type=a.media_type, retention=a.retention) for a in result.artifacts}
        return Feedback(score=float(result.score), values=content_values, artifacts=artifacts)

    def _their_record(self, record: EpisodeRecord) -> Any:
        types = self._types
        if not record.evidence:
            why = record.summary.get("evidence_error", "the runner sent none")
            raise EvidenceError(f"Episode {record.index} has no evidence ({why})")
        evidence = decode_evidence(record.evidence, types)
        failure = FAILURE_CODES.get(record.failure or "", "exception") if record.status != "completed" else None
        transitions = evidence["transitions"]
        if failure is not None and transitions and transitions[-1].step.done:
            # The Host classified an Episode the Environment had finished as a failure (the container died on its
            # way out): their record cannot hold both, and the failure is what counts.
            transitions = transitions[:-1]
        return types.EpisodeRecord(
            episode=evidence["episode"],
            policy_seed=evidence["policy_seed"],
            initial_observation=evidence["initial_observation"],
            transitions=tuple(transitions),
            policy_failure=failure,
        )


class RecordingEnvironment:
    """Their Environment for one Episode, stepping as ours and recording every transition as evidence.

    Each transition is encoded and compressed as it happens (the Environment's time, never the policy's), so the
    evidence is bounded: past limit_bytes of compressed evidence, or EVIDENCE_DECODED_LIMIT_BYTES before
    compression, recording stops and evidence() raises EvidenceError saying so.
    """

    def __init__(self, environment: Any, payload: bytes, types: Any, limit_bytes: int | None = None) -> None:
        from epg_sdk.runtime.episode_loop import EVIDENCE_LIMIT_BYTES

        self._environment = environment
        self._types = types
        self._payload = payload
        self._limit = EVIDENCE_LIMIT_BYTES if limit_bytes is None else limit_bytes
        self._chunks: list[bytes] = []
        self._size = 0  # compressed bytes so far
        self._decoded = 0  # the same before compression
        self._compressor = zlib.compressobj(EVIDENCE_COMPRESSION_LEVEL)
        self._overflow = ""

    def _record(self, value: Any) -> None:
        if self._overflow:
            return
        data = encode_exact(value).SerializeToString()
        self._decoded += _LENGTH.size + len(data)
        if self._decoded > EVIDENCE_DECODED_LIMIT_BYTES:
            self._drop(f"evidence over {EVIDENCE_DECODED_LIMIT_BYTES} bytes before compression was dropped")
            return
        chunk = self._compressor.compress(_LENGTH.pack(len(data)) + data)
        self._size += len(chunk)
        if self._size > self._limit:
            self._drop(f"evidence over {self._limit} bytes was dropped")
            return
        if chunk:
            self._chunks.append(chunk)

    def _drop(self, why: str) -> None:
        self._overflow = why
        self._chunks.clear()
        self._compressor = zlib.compressobj(EVIDENCE_COMPRESSION_LEVEL)

    def reset(self) -> Any:
        observation = self._environment.reset()
        self._record(observation)
        return observation

    def step(self, action: Any) -> StepResult:
        """Apply the action as the policy sent it. Raises our InvalidAction for theirs."""
        try:
            step = self._environment.step(action)
        except self._types.InvalidAction as exc:
            raise InvalidAction("the Environment refused the action") from exc
        if type(step) is not self._types.Step:
            raise TypeError(f"Environment.step returned {type(step).__name__}, not Step")
        self._record((action, step.observation, step.reward, step.terminated, step.truncated, step.metrics))
        return StepResult(observation=step.observation, reward=step.reward, terminated=step.terminated, truncated=step.truncated)

    def summary(self) -> dict[str, Any]:
        """Nothing: their Feedback reads the evidence."""
        return {}

    def evidence(self, *, policy_seed: int) -> bytes:
        """The Episode's evidence, one zlib stream: the initial observation, then one entry per transition, then a
        trailer (format, the planned Episode, the policy seed); each a length-prefixed `epg.v1.Value`.

        Raises EvidenceError when the trajectory outgrew a bound.
        """
        if self._overflow:
            raise EvidenceError(self._overflow)
        trailer = encode_exact({"format": EVIDENCE_FORMAT, "episode": self._payload, "policy_seed": policy_seed}).SerializeToString()
        end = self._compressor.compress(_LENGTH.pack(len(trailer)) + trailer) + self._compressor.flush()
        if self._size + len(end) > self._limit:
            raise EvidenceError(f"evidence over {self._limit} bytes was dropped")
        return b"".join((*self._chunks, end))

    def close(self) -> None:
        self._environment.close()


def encode_episode(episode: Any) -> bytes:
    """Return the payload of their EpisodeSpec: a map of environment_seed and scenario, exact and deterministic."""
    return encode_exact({"environment_seed": episode.environment_seed, "scenario": episode.scenario}).SerializeToString(deterministic=True)


def decode_episode(payload: bytes, types: Any) -> Any:
    """Return their EpisodeSpec of a payload made by encode_episode. Raises ValueError for a malformed one."""
    message = pb.Value()
    message.ParseFromString(payload)
    fields = decode_exact(message)
    if not isinstance(fields, dict) or set(fields) != {"environment_seed", "scenario"}:
        raise ValueError("the payload is not an EvoPolicyGym Episode")
    return types.EpisodeSpec(environment_seed=fields["environment_seed"], scenario=fields["scenario"])


def decode_evidence(data: bytes, types: Any) -> dict[str, Any]:
    """Return the episode, policy_seed, initial_observation and transitions (their Transition values) of evidence.

    Raises EvidenceError for evidence that evidence() did not write, or that grows past
    EVIDENCE_DECODED_LIMIT_BYTES.
    """
    entries = []
    position = 0
    try:
        stream = zlib.decompressobj()
        data = stream.decompress(data, EVIDENCE_DECODED_LIMIT_BYTES + 1)
        if len(data) > EVIDENCE_DECODED_LIMIT_BYTES:
            raise EvidenceError(f"evidence grows past {EVIDENCE_DECODED_LIMIT_BYTES} bytes")
        if not stream.eof or stream.unused_data:
            raise EvidenceError("evidence is truncated" if not stream.eof else "evidence has bytes past its end")
        while position < len(data):
            (length,) = _LENGTH.unpack_from(data, position)
            position += _LENGTH.size
            if position + length > len(data):
                raise EvidenceError("evidence is truncated")
            message = pb.Value()
            message.ParseFromString(data[position:position + length])
            entries.append(decode_exact(message))
            position += length
        header = entries[-1] if entries else None
        if not isinstance(header, dict) or header.get("format") != EVIDENCE_FORMAT or len(entries) < 2:
            raise EvidenceError(f"evidence is not in the {EVIDENCE_FORMAT} format")
        transitions = []
        for entry in entries[1:-1]:
            if not isinstance(entry, tuple) or len(entry) != 6:
                raise EvidenceError(f"evidence is not in the {EVIDENCE_FORMAT} format")
            action, observation, reward, terminated, truncated, metrics = entry
            step = types.Step(observation=observation, reward=reward, terminated=terminated, truncated=truncated, metrics=metrics)
            transitions.append(types.Transition(action=action, step=step))
        return {
            "episode": decode_episode(header["episode"], types),
            "policy_seed": header["policy_seed"],
            "initial_observation": entries[0],
            "transitions": transitions,
        }
    except EvidenceError:
        raise
    except (struct.error, zlib.error, ValueError, TypeError) as exc:
        raise EvidenceError(f"malformed evidence: {exc}") from None


def failure_return(benchmark: Any, spec: Any) -> float:
    """What a failed Episode scores in their Benchmark: the first finite number under FAILURE_KEYS in its metadata
    (then its environment parameters); else the score their feedback gives one Episode that failed at once;
    else 0.0."""
    for source in (spec.metadata, spec.environment_parameters):
        for key in FAILURE_KEYS:
            number = source.get(key) if isinstance(source, Mapping) else None
            if isinstance(number, (int, float)) and not isinstance(number, bool) and math.isfinite(number):
                return float(number)
    try:
        return _probe_failure_score(benchmark)
    except Exception:  # their feedback may need more than one failed Episode shows; 0.0 is then the honest default
        return 0.0


def _probe_failure_score(benchmark: Any) -> float:
    types = _their_types()
    (episode,) = tuple(benchmark.episodes("train", seed=0, count=1))
    environment = benchmark.make_environment(episode)
    try:
        initial = environment.reset()
    finally:
        environment.close()
    record = types.EpisodeRecord(episode=episode, policy_seed=0, initial_observation=initial, transitions=(), policy_failure="exception")
    score = float(benchmark.feedback((record,)).score)
    if not math.isfinite(score):
        raise ValueError("non-finite failure score")
    return score


def _our_spec(benchmark: Any, *, step_seconds: float, episode_seconds: float) -> BenchmarkSpec:
    spec = benchmark.spec
    return BenchmarkSpec(
        id=spec.id,
        description=spec.description,
        observation_space=spec.observation_space,
        action_space=spec.action_space,
        horizon=spec.max_episode_steps,
        failure_return=failure_return(benchmark, spec),
        primary_metric=spec.primary_metric,
        direction=spec.score_direction,
        parameters=dict(spec.environment_parameters.items()),
        program_abi=PROGRAM_ABI,
        metadata=dict(spec.metadata.items()),
        step_seconds=step_seconds,
        episode_seconds=episode_seconds,
    )


class _TheirTypes:
    """The authoring types of the installed `evopolicygym`, imported when a Benchmark is first wrapped."""

    def __init__(self) -> None:
        # Imported by name: `evopolicygym` is installed beside the SDK only where their Benchmarks run.
        authoring = importlib.import_module("evopolicygym.authoring")

        self.EpisodeRecord = authoring.EpisodeRecord
        self.EpisodeSpec = authoring.EpisodeSpec
        self.InvalidAction = authoring.InvalidAction
        self.Step = authoring.Step
        self.Transition = authoring.Transition
        self.copy_policy_value = importlib.import_module("evopolicygym.policy").copy_policy_value


def _their_types() -> _TheirTypes:
    return _TheirTypes()


__all__ = [
    "EVIDENCE_FORMAT",
    "FAILURE_CODES",
    "PROGRAM_ABI",
    "EvidenceError",
    "EvoPolicyGymBenchmark",
    "RecordingEnvironment",
    "decode_episode",
    "decode_evidence",
    "encode_episode",
    "failure_return",
    "is_structural_benchmark",
]

