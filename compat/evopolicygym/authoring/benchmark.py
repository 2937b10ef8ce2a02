"""The Benchmark contract: BenchmarkSpec (static public metadata and the environment-parameters digest) and the Benchmark protocol."""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal, Protocol, TypeAlias, runtime_checkable

from ..policy import PolicyValue, TensorValue, copy_policy_mapping, copy_policy_value
from ..results import SCORE_DIRECTIONS, Feedback
from .environment import Environment, EpisodeRecord, EpisodeSpec

ScoreDirection: TypeAlias = Literal["maximize", "minimize"]

_PARAMETERS_DOMAIN = b"evopolicygym/environment-parameters/v1\x00"


def _sized(data: bytes) -> bytes:
    return len(data).to_bytes(8, "big") + data


def _canonical_chunks(value: PolicyValue) -> Iterator[bytes]:
    """The canonical encoding of a PolicyValue, in chunks: a one-letter tag, then length-prefixed fields (8-byte big-endian lengths).

    Dict entries are ordered by the UTF-8 bytes of their keys, so equal mappings encode alike whatever their insertion order;
    lists (L) and tuples (U) encode differently.
    """
    if value is None:
        yield b"N"
    elif type(value) is bool:
        yield b"B1" if value else b"B0"
    elif type(value) is int:
        yield b"I" + _sized(str(value).encode("ascii"))
    elif type(value) is float:
        yield b"F" + struct.pack(">d", value)
    elif type(value) is str:
        yield b"S" + _sized(value.encode("utf-8"))
    elif type(value) is bytes:
        yield b"Y" + _sized(value)
    elif type(value) is TensorValue:
        yield b"T" + _sized(value.dtype.encode("ascii")) + len(value.shape).to_bytes(8, "big")
        for size in value.shape:
            yield _sized(str(size).encode("ascii"))
        yield _sized(value.data)
    elif type(value) is list or type(value) is tuple:
        yield (b"L" if type(value) is list else b"U") + len(value).to_bytes(8, "big")
        for item in value:
            yield from _canonical_chunks(item)
    elif type(value) is dict:
        yield b"M" + len(value).to_bytes(8, "big")
        for key in sorted(value, key=lambda text: text.encode("utf-8")):
            yield _sized(key.encode("utf-8"))
            yield from _canonical_chunks(value[key])
    else:
        raise TypeError(f"unsupported environment parameter carrier: {type(value).__name__}")


def environment_parameters_digest(parameters: Mapping[str, PolicyValue]) -> str:
    """Return `sha256:<hex>` of the canonical encoding of a str-keyed mapping of PolicyValues (the Benchmark's environment identity).

    Raises TypeError or ValueError, as copy_policy_value does, for a value that is not a PolicyValue.
    """
    hasher = hashlib.sha256(_PARAMETERS_DOMAIN)
    for chunk in _canonical_chunks(copy_policy_mapping(parameters, "environment_parameters")):
        hasher.update(chunk)
    return "sha256:" + hasher.hexdigest()


class EnvironmentParameters(Mapping[str, PolicyValue]):
    """A read-only mapping of environment parameters whose lookups return detached copies, with the digest of its content."""

    __slots__ = ("_values", "_digest")

    def __init__(self, values: Mapping[str, PolicyValue]) -> None:
        copied = copy_policy_mapping(values, "environment_parameters")
        self._values: Mapping[str, PolicyValue] = MappingProxyType(copied)
        self._digest = environment_parameters_digest(copied)

    @property
    def digest(self) -> str:
        """`sha256:<hex>` of the parameters' canonical encoding."""
        return self._digest

    def __getitem__(self, key: str) -> PolicyValue:
        return copy_policy_value(self._values[key])

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"EnvironmentParameters({dict(self._values)!r})"


@dataclass(frozen=True, slots=True)
class BenchmarkSpec:
    """A Benchmark's static public description, known without opening an Environment.

    The spaces are free-form PolicyValue descriptions passed to every Policy; metadata becomes a read-only mapping and
    environment_parameters an EnvironmentParameters, whose digest is environment_digest. Raises ValueError for empty
    id, description or primary_metric, a max_episode_steps that is not a positive int, or a score_direction other than
    maximize and minimize; TypeError for a mapping that is not one or has a non-str key; and what copy_policy_value
    raises for a value that is not a PolicyValue.
    """

    id: str
    description: str
    observation_space: PolicyValue
    action_space: PolicyValue
    metadata: Mapping[str, PolicyValue]
    max_episode_steps: int
    primary_metric: str
    score_direction: ScoreDirection
    environment_parameters: Mapping[str, PolicyValue] = field(default_factory=dict)
    _environment_digest: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("id", "description", "primary_metric"):
            text = getattr(self, name)
            if type(text) is not str or not text:
                raise ValueError(f"{name} must be non-empty text")
        if type(self.max_episode_steps) is not int or self.max_episode_steps < 1:
            raise ValueError("max_episode_steps must be a positive integer")
        if self.score_direction not in SCORE_DIRECTIONS:
            raise ValueError("score_direction must be 'maximize' or 'minimize'")
        metadata = copy_policy_mapping(self.metadata, "metadata")
        parameters = EnvironmentParameters(self.environment_parameters)
        object.__setattr__(self, "observation_space", copy_policy_value(self.observation_space))
        object.__setattr__(self, "action_space", copy_policy_value(self.action_space))
        object.__setattr__(self, "metadata", MappingProxyType(metadata))
        object.__setattr__(self, "environment_parameters", parameters)
        object.__setattr__(self, "_environment_digest", parameters.digest)

    @property
    def environment_digest(self) -> str:
        """`sha256:<hex>` identifying the environment parameters (two configurations of one Benchmark differ here)."""
        return self._environment_digest


@runtime_checkable
class Benchmark(Protocol):
    """What a Benchmark package implements, structurally (no base class, no registration)."""

    @property
    def spec(self) -> BenchmarkSpec:
        """The static public description."""
        ...

    def episodes(self, split: str, *, seed: int, count: int) -> Sequence[EpisodeSpec]:
        """Return exactly count EpisodeSpecs of split (train, validation or test), the same ones for the same seed."""
        ...

    def make_environment(self, episode: EpisodeSpec) -> Environment:
        """Return a fresh Environment for one Episode."""
        ...

    def feedback(self, episodes: Sequence[EpisodeRecord]) -> Feedback:
        """Return the Feedback published about these whole trajectories."""
        ...


__all__ = ["Benchmark", "BenchmarkSpec", "ScoreDirection"]
