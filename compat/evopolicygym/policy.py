"""The policy/v2 Program ABI: the values that cross the Policy boundary, the context a Policy is made with, and the Policy protocol.

Values are exact Python carriers (no subclasses, no NumPy): None, bool, int (signed or unsigned 64-bit), finite float,
str, bytes, TensorValue, and lists, tuples and str-keyed dicts of them. Tuples stay distinct from lists.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Protocol, TypeAlias, Union, runtime_checkable

POLICY_ABI_VERSION = "policy/v2"

U64_MAX = 2**64 - 1
I64_MIN = -(2**63)

# dtype name -> (bytes per element, little-endian struct code of a floating dtype, or None)
_DTYPES: Mapping[str, tuple[int, str | None]] = MappingProxyType(
    {
        "bool": (1, None),
        "int8": (1, None),
        "uint8": (1, None),
        "int16": (2, None),
        "uint16": (2, None),
        "int32": (4, None),
        "uint32": (4, None),
        "int64": (8, None),
        "uint64": (8, None),
        "float16": (2, "<e"),
        "float32": (4, "<f"),
        "float64": (8, "<d"),
    }
)
TENSOR_DTYPES: frozenset[str] = frozenset(_DTYPES)


@dataclass(frozen=True, slots=True)
class TensorValue:
    """A dense little-endian tensor: a dtype name, a shape and exactly the bytes they call for.

    Raises ValueError for an unknown dtype, a negative dimension, a byte count that does not match dtype and shape,
    a bool element other than 0 or 1, or a non-finite floating element; TypeError when shape is not an exact tuple
    of ints or data is not exact bytes.
    """

    dtype: str
    shape: tuple[int, ...]
    data: bytes

    def __post_init__(self) -> None:
        if type(self.dtype) is not str or self.dtype not in _DTYPES:
            raise ValueError(f"unsupported tensor dtype: {self.dtype!r}")
        if type(self.shape) is not tuple:
            raise TypeError("tensor shape must be an exact tuple")
        for size in self.shape:
            if type(size) is not int or size < 0:
                raise ValueError("tensor dimensions must be non-negative exact integers")
        if type(self.data) is not bytes:
            raise TypeError("tensor data must be exact bytes")
        width, float_code = _DTYPES[self.dtype]
        if len(self.data) != math.prod(self.shape) * width:
            raise ValueError(f"tensor data holds {len(self.data)} bytes, dtype {self.dtype} and shape {self.shape} need {math.prod(self.shape) * width}")
        if self.dtype == "bool" and self.data.translate(None, b"\x00\x01"):
            raise ValueError("bool tensor data must contain only zero or one bytes")
        if float_code is not None and not all(math.isfinite(element) for (element,) in struct.iter_unpack(float_code, self.data)):
            raise ValueError("floating tensor data must be finite")


PolicyScalar: TypeAlias = Union[None, bool, int, float, str, bytes]
PolicyValue: TypeAlias = Union[PolicyScalar, TensorValue, list["PolicyValue"], tuple["PolicyValue", ...], dict[str, "PolicyValue"]]


def copy_policy_value(value: PolicyValue) -> PolicyValue:
    """Return a detached copy of value after checking that every part of it is an exact PolicyValue carrier.

    Lists, tuples and dicts are copied (immutable leaves are shared); a TensorValue is rebuilt, so it is checked again.
    Raises TypeError for any other carrier (a subclass, a set, a NumPy value, a non-str dict key) and ValueError for an
    int outside [-2**63, 2**64 - 1] or a non-finite float.
    """
    kind = type(value)
    if value is None or kind is bool or kind is str or kind is bytes:
        return value
    if kind is int:
        assert isinstance(value, int)
        if value < I64_MIN or value > U64_MAX:
            raise ValueError("PolicyValue integers must fit in signed or unsigned 64 bits")
        return value
    if kind is float:
        assert isinstance(value, float)
        if not math.isfinite(value):
            raise ValueError("PolicyValue floats must be finite")
        return value
    if kind is TensorValue:
        assert isinstance(value, TensorValue)
        return TensorValue(value.dtype, value.shape, value.data)
    if kind is list:
        assert isinstance(value, list)
        return [copy_policy_value(item) for item in value]
    if kind is tuple:
        assert isinstance(value, tuple)
        return tuple(copy_policy_value(item) for item in value)
    if kind is dict:
        assert isinstance(value, dict)
        return copy_policy_mapping(value, "PolicyValue mapping")
    raise TypeError(f"unsupported PolicyValue carrier: {kind.__name__}")


def copy_policy_mapping(mapping: Mapping[str, PolicyValue], what: str) -> dict[str, PolicyValue]:
    """Return a detached dict copy of a str-keyed mapping of PolicyValues.

    Raises TypeError when mapping is not a Mapping or a key is not an exact str (what names it in the message), and
    whatever copy_policy_value raises for a value.
    """
    if not isinstance(mapping, Mapping):
        raise TypeError(f"{what} must be a mapping")
    copied: dict[str, PolicyValue] = {}
    for key, item in mapping.items():
        if type(key) is not str:
            raise TypeError(f"{what} keys must be exact strings")
        copied[key] = copy_policy_value(item)
    return copied


def check_u64(value: object, what: str) -> int:
    """Return value when it is an exact int in [0, 2**64 - 1]; raise ValueError naming what otherwise."""
    if type(value) is not int or not 0 <= value <= U64_MAX:
        raise ValueError(f"{what} must be an unsigned 64-bit integer")
    return value


@dataclass(frozen=True, slots=True)
class PolicyContext:
    """The public, Episode-independent facts one fresh Policy instance is made with.

    The spaces are detached copies; metadata and environment_parameters become read-only mappings of detached copies.
    Raises ValueError when policy_seed is not an unsigned 64-bit int, TypeError when a mapping is not one or has a
    non-str key, and what copy_policy_value raises for a value that is not a PolicyValue.
    """

    observation_space: PolicyValue
    action_space: PolicyValue
    metadata: Mapping[str, PolicyValue]
    environment_parameters: Mapping[str, PolicyValue]
    policy_seed: int

    def __post_init__(self) -> None:
        check_u64(self.policy_seed, "policy_seed")
        metadata = copy_policy_mapping(self.metadata, "metadata")
        parameters = copy_policy_mapping(self.environment_parameters, "environment_parameters")
        object.__setattr__(self, "observation_space", copy_policy_value(self.observation_space))
        object.__setattr__(self, "action_space", copy_policy_value(self.action_space))
        object.__setattr__(self, "metadata", MappingProxyType(metadata))
        object.__setattr__(self, "environment_parameters", MappingProxyType(parameters))


@runtime_checkable
class Policy(Protocol):
    """What `make_policy(context)` returns: one instance per Episode, which may keep state between calls."""

    def act(self, observation: PolicyValue) -> PolicyValue:
        """Return the Action for this observation."""
        ...


__all__ = [
    "POLICY_ABI_VERSION",
    "Policy",
    "PolicyContext",
    "PolicyScalar",
    "PolicyValue",
    "TensorValue",
    "copy_policy_value",
]
