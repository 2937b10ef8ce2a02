"""Conversion between Python values and the `epg.v1.Value` message, in two views.

`encode`/`decode` are our Program ABI's view (NumPy arrays and scalars, tuples
read back as lists). `encode_exact`/`decode_exact` are EvoPolicyGym's
`policy/v2` view: exact Python carriers only, `TensorValue` for tensors, tuples
kept apart from lists, unsigned 64-bit integers.
"""

from __future__ import annotations

import hashlib
import importlib
import math
import struct
from collections.abc import Sequence
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
_MAX_DIMS = 32  # NumPy 1.x allows no more
POLICY_V2_ABI = "policy/v2"  # Start.program_abi of EvoPolicyGym 0.3 Programs, whose values are the exact view
_INT64_MAX = 2**63 - 1
_DTYPE_NAMES: dict[int, str] = {code: name for name, code in _DTYPES.items()}
_FLOAT_DTYPES = frozenset({"float16", "float32", "float64"})
_TENSOR_VALUE: type | None = None  # evopolicygym.policy.TensorValue, imported on first use


class ValueCodecError(ValueError):
    """A value cannot be encoded or decoded (unsupported type, bad tensor, too deep)."""


def encode(obj: Any, _depth: int = 0) -> pb.Value:
    """Return the Value message for obj.

    Accepts None, bool, int (signed or unsigned 64-bit), float, str, bytes,
    NumPy arrays and scalars, EvoPolicyGym `TensorValue`s, and lists, tuples and
    str-keyed dicts of those. Tuples are written as lists: the messages of our
    ABI stay what they were byte for byte (`encode_exact` keeps tuples).
    Raises ValueCodecError otherwise.
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
        if -(2**63) <= number < 2**63:  # literals, folded by the compiler: the per-step path of an int action
            value.int64 = number
        elif 2**63 <= number < 2**64:
            value.uint64 = number
        else:
            raise ValueCodecError(f"integer {number} does not fit in 64 bits (signed or unsigned)")
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
    elif type(obj).__name__ == "TensorValue" and all(hasattr(obj, name) for name in ("dtype", "shape", "data")):
        _fill_tensor_value(value.tensor, obj)
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


def _fill_tensor_value(tensor: pb.Tensor, obj: Any) -> None:
    """Write a TensorValue after checking what its class promises (a hostile one may lie)."""
    dtype, shape, data = obj.dtype, obj.shape, obj.data
    if type(dtype) is not str or dtype not in _DTYPES:
        raise ValueCodecError(f"unsupported TensorValue dtype {dtype!r}")
    if type(shape) is not tuple or any(type(size) is not int or not 0 <= size <= _INT64_MAX for size in shape):
        raise ValueCodecError("TensorValue shape must be a tuple of non-negative 64-bit ints")
    if type(data) is not bytes:
        raise ValueCodecError(f"TensorValue data must be bytes, not {type(data).__name__}")
    if len(data) != math.prod(shape) * _NUMPY_DTYPES[_DTYPES[dtype]].itemsize:
        raise ValueCodecError(f"TensorValue of shape {shape} and dtype {dtype} does not match its {len(data)} bytes")
    _check_tensor_elements(dtype, data)
    tensor.dtype = _DTYPES[dtype]
    tensor.shape.extend(shape)
    tensor.data = data


def _check_tensor_elements(dtype: str, data: bytes) -> None:
    if dtype == "bool" and data.translate(None, b"\x00\x01"):
        raise ValueCodecError("a bool tensor holds bytes other than 0 and 1")
    if dtype in _FLOAT_DTYPES and data and not np.isfinite(np.frombuffer(data, dtype=_NUMPY_DTYPES[_DTYPES[dtype]])).all():
        raise ValueCodecError("a floating tensor holds a value that is not finite")


def encode_exact(obj: object) -> pb.Value:
    """Return the Value message of an exact `policy/v2` value.

    Accepts exactly None, bool, int in [-2**63, 2**64 - 1], finite float, str,
    bytes, `evopolicygym.policy.TensorValue`, and list, tuple and dict with str
    keys of those, nested at most MAX_DEPTH deep: the classes themselves (`type(x)
    is int`), never a subclass, a NumPy value or another sequence. Raises
    ValueCodecError for anything else.
    """
    value = pb.Value()
    _fill_exact_checked(value, obj)
    return value


def encode_exact_into(value: pb.Value, obj: object) -> None:
    """Overwrite value with the exact value obj (see encode_exact). Raises ValueCodecError."""
    value.Clear()
    _fill_exact_checked(value, obj)


def _fill_exact_checked(value: pb.Value, obj: object) -> None:
    try:
        _fill_exact(value, obj, 0)
    except UnicodeEncodeError as exc:  # a str with a lone surrogate: not UTF-8, so not a value
        raise ValueCodecError(f"text is not valid UTF-8: {exc}") from exc


def _fill_exact(value: pb.Value, obj: Any, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise ValueCodecError("value nested too deeply")
    kind = type(obj)
    if obj is None:
        value.none.SetInParent()
    elif kind is bool:
        value.boolean = obj
    elif kind is int:
        if -(2**63) <= obj < 2**63:
            value.int64 = obj
        elif 2**63 <= obj < 2**64:
            value.uint64 = obj
        else:
            raise ValueCodecError(f"integer {obj} does not fit in 64 bits (signed or unsigned)")
    elif kind is float:
        if not math.isfinite(obj):
            raise ValueCodecError(f"float {obj} is not finite")
        value.float64 = obj
    elif kind is str:
        value.text = obj
    elif kind is bytes:
        value.raw = obj
    elif kind is list or kind is tuple:
        target = value.list if kind is list else value.tuple
        target.SetInParent()
        items = target.items
        for item in obj:
            _fill_exact(items.add(), item, depth + 1)
    elif kind is dict:
        entries = value.map.entries
        value.map.SetInParent()
        for key, item in obj.items():
            if type(key) is not str:
                raise ValueCodecError(f"map keys must be exact strings, not {type(key).__name__}")
            _fill_exact(entries[key], item, depth + 1)
    elif kind.__name__ == "TensorValue" and kind is _tensor_value_class():
        _fill_tensor_value(value.tensor, obj)
    else:
        raise ValueCodecError(f"{kind.__module__}.{kind.__qualname__} is not an exact policy value")


def _tensor_value_class() -> type:
    """evopolicygym.policy.TensorValue, imported on first use (only the policy/v2 images have it)."""
    global _TENSOR_VALUE
    if _TENSOR_VALUE is None:
        try:
            module = importlib.import_module("evopolicygym.policy")
        except ImportError as exc:
            raise ValueCodecError(f"TensorValue needs evopolicygym.policy, which cannot be imported: {exc}") from exc
        _TENSOR_VALUE = module.TensorValue
    return _TENSOR_VALUE


def decode_exact(value: pb.Value, _depth: int = 0) -> object:
    """Return the exact `policy/v2` value of a Value message.

    Tensors become `evopolicygym.policy.TensorValue`, tuples tuples, lists
    lists, maps dicts (keys in the order of their UTF-8 bytes, as EvoPolicyGym's
    own wire gives them), both integer kinds int. Raises ValueCodecError for a
    value without a kind, a float that is not finite, a malformed tensor, a
    value nested too deeply, or when evopolicygym cannot be imported for a tensor.
    """
    if _depth > MAX_DEPTH:
        raise ValueCodecError("value nested too deeply")
    kind = value.WhichOneof("kind")
    if kind == "int64":
        return value.int64
    if kind == "float64":
        number = value.float64
        if not math.isfinite(number):
            raise ValueCodecError(f"float {number} is not finite")
        return number
    if kind == "boolean":
        return value.boolean
    if kind == "text":
        return value.text
    if kind == "raw":
        return value.raw
    if kind == "none":
        return None
    if kind == "tensor":
        return _decode_tensor_value(value.tensor)
    if kind == "list":
        return [decode_exact(item, _depth + 1) for item in value.list.items]
    if kind == "tuple":
        return tuple(decode_exact(item, _depth + 1) for item in value.tuple.items)
    if kind == "map":
        entries = value.map.entries
        return {key: decode_exact(entries[key], _depth + 1) for key in sorted(entries, key=str.encode)}
    if kind == "uint64":
        return value.uint64
    raise ValueCodecError("a Value without a kind is not an exact policy value")


def _decode_tensor_value(tensor: pb.Tensor) -> object:
    name = _DTYPE_NAMES.get(tensor.dtype)
    if name is None:
        raise ValueCodecError(f"unknown tensor dtype code {tensor.dtype}")
    shape = tuple(tensor.shape)
    data = tensor.data
    if min(shape, default=0) < 0 or len(data) != math.prod(shape) * _NUMPY_DTYPES[tensor.dtype].itemsize:
        raise ValueCodecError(f"tensor of shape {shape} and dtype {name} does not match its {len(data)} bytes")
    _check_tensor_elements(name, data)
    try:
        return _tensor_value_class()(dtype=name, shape=shape, data=data)
    except (TypeError, ValueError) as exc:
        raise ValueCodecError(f"invalid tensor: {exc}") from exc


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
    if kind == "uint64":
        return value.uint64
    if kind == "tuple":
        return [decode(item, _depth + 1) for item in value.tuple.items]  # our ABI has no tuples
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


def tensor_code(obj: Any) -> int | None:
    """The DType code of obj when it is a NumPy array our ABI sends as a tensor as it is, else None."""
    return _CODES_BY_DTYPE.get(obj.dtype) if type(obj) is np.ndarray else None


def decode_tensor_bytes(code: int, shape: Sequence[int], data: memoryview) -> np.ndarray:
    """Return a writable array (native byte order) of the little-endian tensor in data (shared memory, say).

    The array is a copy: the bytes may change once the caller answers. Raises
    ValueCodecError for an unknown dtype code, a negative size, or a shape
    that does not match the length of data.
    """
    dtype = _NUMPY_DTYPES.get(code)
    if dtype is None:
        raise ValueCodecError(f"unknown tensor dtype code {code}")
    dims = tuple(shape)
    if min(dims, default=0) < 0 or len(dims) > _MAX_DIMS or data.nbytes != dtype.itemsize * math.prod(dims):
        raise ValueCodecError(f"tensor of shape {dims} and dtype {dtype.name} does not match its {data.nbytes} bytes")
    if not _NATIVE_LITTLE:
        return np.frombuffer(data, dtype=dtype).reshape(dims).astype(dtype.newbyteorder("="))
    return np.frombuffer(bytearray(data), dtype=dtype).reshape(dims)  # the bytearray is the copy, and writable


_DIGEST_DOMAIN = b"epg/parameters/v1\0"


def digest(value: pb.Value) -> str:
    """Return "sha256:" and the hex SHA-256 of the canonical encoding of value (a Benchmark's parameters digest).

    The encoding walks the Value: one tag byte per kind, then a fixed-width or length-prefixed body; lists and
    tuples give their length first, maps their entries sorted by the UTF-8 bytes of their keys. So equal
    parameters give one digest whatever the order of a map's entries or the protobuf version.
    """
    hasher = hashlib.sha256(_DIGEST_DOMAIN)
    _digest_value(hasher, value, 0)
    return "sha256:" + hasher.hexdigest()


def _digest_value(digest: Any, value: pb.Value, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise ValueCodecError("value nested too deeply")
    kind = value.WhichOneof("kind")
    if kind in ("list", "tuple"):
        items = getattr(value, kind).items
        digest.update(b"L" if kind == "list" else b"U")
        digest.update(struct.pack(">Q", len(items)))
        for item in items:
            _digest_value(digest, item, depth + 1)
    elif kind == "map":
        entries = sorted((key.encode(), item) for key, item in value.map.entries.items())
        digest.update(b"M" + struct.pack(">Q", len(entries)))
        for key, item in entries:
            digest.update(struct.pack(">Q", len(key)) + key)
            _digest_value(digest, item, depth + 1)
    elif kind == "tensor":
        tensor = value.tensor
        digest.update(b"T" + struct.pack(">IQ", tensor.dtype, len(tensor.shape)))
        digest.update(b"".join(struct.pack(">q", size) for size in tensor.shape))
        digest.update(struct.pack(">Q", len(tensor.data)) + tensor.data)
    elif kind == "float64":
        digest.update(b"F" + struct.pack(">d", value.float64))
    elif kind == "int64":
        digest.update(b"I" + struct.pack(">q", value.int64))
    elif kind == "uint64":
        digest.update(b"Q" + struct.pack(">Q", value.uint64))
    elif kind == "boolean":
        digest.update(b"B1" if value.boolean else b"B0")
    elif kind in ("text", "raw"):
        data = value.text.encode() if kind == "text" else value.raw
        digest.update((b"S" if kind == "text" else b"Y") + struct.pack(">Q", len(data)) + data)
    else:
        digest.update(b"N")
