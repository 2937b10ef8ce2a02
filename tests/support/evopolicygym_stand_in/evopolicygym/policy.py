"""Test-only stand-in for `evopolicygym.policy`: TensorValue and PolicyContext with the documented checks.

Only the tests of the exact value codec and of the policy/v2 runtime import it, and only when
compat/evopolicygym (the product's implementation) is absent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

_ITEM_SIZES = {
    "bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "float16": 2,
    "int32": 4, "uint32": 4, "float32": 4, "int64": 8, "uint64": 8, "float64": 8,
}


@dataclass(frozen=True, slots=True)
class TensorValue:
    """A dense little-endian tensor: dtype name, shape tuple, raw bytes."""

    dtype: str
    shape: tuple[int, ...]
    data: bytes

    def __post_init__(self) -> None:
        if type(self.dtype) is not str or self.dtype not in _ITEM_SIZES:
            raise ValueError(f"unsupported dtype {self.dtype!r}")
        if type(self.shape) is not tuple or any(type(n) is not int or n < 0 for n in self.shape):
            raise TypeError("shape must be a tuple of non-negative ints")
        if type(self.data) is not bytes or len(self.data) != math.prod(self.shape) * _ITEM_SIZES[self.dtype]:
            raise ValueError("data does not match dtype and shape")


@dataclass(frozen=True, slots=True)
class PolicyContext:
    """What make_policy(context) receives."""

    observation_space: object
    action_space: object
    metadata: Mapping[str, object]
    environment_parameters: Mapping[str, object]
    policy_seed: int

    def __post_init__(self) -> None:
        if type(self.policy_seed) is not int or not 0 <= self.policy_seed < 2**64:
            raise ValueError("policy_seed must be an unsigned 64-bit int")
        object.__setattr__(self, "metadata", MappingProxyType(dict(self.metadata)))
        object.__setattr__(self, "environment_parameters", MappingProxyType(dict(self.environment_parameters)))
