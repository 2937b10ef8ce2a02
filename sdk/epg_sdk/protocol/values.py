"""Conversion between Python/NumPy values and the `epg.v1.Value` message."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from epg.v1 import values_pb2 as pb

_DTYPES: dict[str, pb.DType.ValueType] = {
    "bool": pb.DTYPE_BOOL,
    "int8": pb.DTYPE_INT8,
    "int16": pb.DTYPE_INT16,
    "int32": pb.DTYPE_INT32,
    "int64": pb.DTYPE_INT64,
    "uint8": pb.DTYPE_UINT8,
    "uint16": pb.DTYPE_UINT16,
    "uint32": pb.DTYPE_UINT32,
    "uint64": pb.DTYPE_UINT64,
    "float16": pb.DTYPE_FLOAT16,
    "float32": pb.DTYPE_FLOAT32,
    "float64": pb.DTYPE_FLOAT64,
}
_NUMPY_DTYPES: dict[int, np.dtype] = {code: np.dtype(name).newbyteorder("<") for name, code in _DTYPES.items()}

_CODES_BY_DTYPE: dict[np.dtype, pb.DType.ValueType] = {np.dtype(name).newbyteorder("<"): code for name, code in _DTYPES.items()}
_CODES_BY_DTYPE.update({np.dtype(name).newbyteorder("|"): code for name, code in _DTYPES.items() if np.dtype(name).itemsize == 1})
_NATIVE_LITTLE = np.dtype("<f4").isnative
MAX_DEPTH = 32


class ValueCodecError(ValueError):
    """A value cannot be encoded or decoded (unsupported type, bad tensor, too deep)."""


def encode(obj: Any, _depth: int = 0) -> pb.Value:
    """Return the Value message for obj.

    Accepts None, bool, int, float, str, bytes, NumPy arrays and scalars, and
    lists, tuples and str-keyed dicts of those. Raises ValueCodecError otherwise.
    """
    value = pb.Value()
    _fill(value, obj, _depth)
    return value


def encode_into(value: pb.Value, obj: Any) -> None:
    """Overwrite value with obj; the per-step fast path for arrays and scalars. Raises ValueCodecError."""
    if type(obj) is np.ndarray:
        code = _CODES_BY_DTYPE.get(obj.dtype)  # a dtype lookup, not dtype.name: ten times cheaper
        if code is not None:
            tensor = value.tensor
            tensor.dtype = code
            tensor.shape[:] = obj.shape
            tensor.data = obj.tobytes()
            return
    value.Clear()
    _fill(value, obj, 0)


def _fill(value: pb.Value, obj: Any, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise ValueCodecError("value nested too deeply")
    if isinstance(obj, np.ndarray):
        _fill_tensor(value.tensor, obj)
    elif obj is None:
        value.none.SetInParent()
    elif isinstance(obj, (bool, np.bool_)):
        value.boolean = bool(obj)
    elif isinstance(obj, (int, np.integer)):
        number = int(obj)
        if not -(2**63) <= number < 2**63:
            raise ValueCodecError(f"integer {number} does not fit in 64 bits")
        value.int64 = number
    elif isinstance(obj, (float, np.floating)):
        value.float64 = float(obj)
    elif isinstance(obj, str):
        value.text = obj
    elif isinstance(obj, (bytes, bytearray, memoryview)):
        value.raw = bytes(obj)
    elif isinstance(obj, (list, tuple)):
        items = value.list.items
        value.list.SetInParent()
        for item in obj:
            _fill(items.add(), item, depth + 1)
    elif isinstance(obj, dict):
        entries = value.map.entries
        value.map.SetInParent()
        for key, item in obj.items():
            if not isinstance(key, str):
                raise ValueCodecError(f"map keys must be strings, not {type(key).__name__}")
            _fill(entries[key], item, depth + 1)
    else:
        raise ValueCodecError(f"cannot encode a value of type {type(obj).__name__}")


def _fill_tensor(tensor: pb.Tensor, array: np.ndarray) -> None:
    code = _DTYPES.get(array.dtype.name)
    if code is None:
        raise ValueCodecError(f"unsupported tensor dtype {array.dtype}")
    tensor.dtype = code
    tensor.shape.extend(array.shape)
    if array.dtype.byteorder == ">":
        array = array.astype(array.dtype.newbyteorder("<"))
    tensor.data = array.tobytes()


def decode(value: pb.Value, _depth: int = 0) -> Any:
    """Return the Python/NumPy value of a Value message (tensors as writable arrays).

    Raises ValueCodecError for a malformed tensor or a value nested too deeply.
    """
    if _depth > MAX_DEPTH:
        raise ValueCodecError("value nested too deeply")
    kind = value.WhichOneof("kind")
    if kind == "tensor":
        return decode_tensor(value.tensor)
    if kind == "int64":
        return value.int64
    if kind == "float64":
        return value.float64
    if kind == "boolean":
        return value.boolean
    if kind == "text":
        return value.text
    if kind == "raw":
        return value.raw
    if kind == "list":
        return [decode(item, _depth + 1) for item in value.list.items]
    if kind == "map":
        return {key: decode(item, _depth + 1) for key, item in value.map.entries.items()}
    return None


def decode_tensor(tensor: pb.Tensor) -> np.ndarray:
    """Return the array of a Tensor message. Raises ValueCodecError when shape and data disagree."""
    dtype = _NUMPY_DTYPES.get(tensor.dtype)
    if dtype is None:
        raise ValueCodecError(f"unknown tensor dtype code {tensor.dtype}")
    shape = tensor.shape
    data = tensor.data
    if len(shape) == 1:
        # The common case of a flat vector, checked without building a tuple.
        if shape[0] * dtype.itemsize != len(data):
            raise ValueCodecError(f"tensor of shape ({shape[0]},) and dtype {dtype.name} does not match its {len(data)} bytes")
        array = np.frombuffer(data, dtype=dtype)
    else:
        dims = tuple(shape)
        if len(data) != dtype.itemsize * math.prod(dims) or min(dims, default=0) < 0:
            raise ValueCodecError(f"tensor of shape {dims} and dtype {dtype.name} does not match its {len(data)} bytes")
        array = np.frombuffer(data, dtype=dtype).reshape(dims)
    # A writable array in native byte order (a copy: the message owns the bytes).
    return array.copy() if _NATIVE_LITTLE else array.astype(dtype.newbyteorder("="))
