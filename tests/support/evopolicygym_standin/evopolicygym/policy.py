"""Stand-in of `evopolicygym.policy`: TensorValue and the exact value carriers."""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import Any

_ITEM_SIZES = {"bool": 1, "int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint8": 1, "uint16": 2, "uint32": 4,
               "uint64": 8, "float16": 2, "float32": 4, "float64": 8}

PolicyValue = Any


@dataclass(frozen=True, slots=True)
class TensorValue:
    dtype: str
    shape: tuple[int, ...]
    data: bytes

    def __post_init__(self) -> None:
        if self.dtype not in _ITEM_SIZES or type(self.shape) is not tuple or type(self.data) is not bytes:
            raise ValueError("malformed TensorValue")
        if len(self.data) != math.prod(self.shape) * _ITEM_SIZES[self.dtype]:
            raise ValueError("tensor data size does not match its dtype and shape")
        if self.dtype.startswith("float") and self.dtype != "float16":
            size = _ITEM_SIZES[self.dtype]
            if any(not math.isfinite(x) for (x,) in struct.iter_unpack("<f" if size == 4 else "<d", self.data)):
                raise ValueError("floating tensor data must be finite")


def copy_policy_value(value: PolicyValue) -> PolicyValue:
    kind = type(value)
    if value is None or kind in (bool, str, bytes, TensorValue):
        return value
    if kind is int:
        if not -(2**63) <= value < 2**64:
            raise ValueError("integer out of range")
        return value
    if kind is float:
        if not math.isfinite(value):
            raise ValueError("float must be finite")
        return value
    if kind is list:
        return [copy_policy_value(item) for item in value]
    if kind is tuple:
        return tuple(copy_policy_value(item) for item in value)
    if kind is dict and all(type(key) is str for key in value):
        return {key: copy_policy_value(item) for key, item in value.items()}
    raise TypeError(f"unsupported PolicyValue carrier: {kind.__name__}")
