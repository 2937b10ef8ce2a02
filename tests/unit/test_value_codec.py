"""Conversion between Python/NumPy values and epg.v1.Value messages."""

from __future__ import annotations

import math

import numpy as np
import pytest

from epg.v1 import values_pb2 as pb
from epg_sdk.protocol.values import MAX_DEPTH, ValueCodecError, decode, decode_tensor, encode, encode_into

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32", "float64"]
SHAPES = [(), (0,), (2, 3)]


def round_trip(obj):
    message = encode(obj)
    return decode(pb.Value.FromString(message.SerializeToString()))


def sample(dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """Extreme and ordinary values of dtype, the largest first, filling shape."""
    kind = np.dtype(dtype).kind
    if kind == "b":
        values = [True, False, True, True, False, False]
    elif kind in "iu":
        info = np.iinfo(dtype)
        values = [int(info.max), int(info.min), 0, 1, int(info.max) - 1, int(info.min) + 1]
    else:
        info = np.finfo(dtype)
        values = [float(info.max), float(info.min), 0.0, -1.5, float(info.tiny), float(info.eps)]
    count = math.prod(shape)
    return np.array(values[:count], dtype=dtype).reshape(shape)


@pytest.mark.parametrize(
    "obj",
    [None, True, False, 0, 1, -1, 2**63 - 1, -(2**63), 0.0, -2.5, 1e300, "", "héllo\0", b"", b"\x00\xff", [], {}],
    ids=repr,
)
def test_scalars_round_trip_with_their_python_type(obj):
    result = round_trip(obj)
    assert result == obj
    assert type(result) is type(obj)


def test_float_specials_round_trip():
    assert round_trip(math.inf) == math.inf
    assert round_trip(-math.inf) == -math.inf
    assert math.isnan(round_trip(math.nan))


def test_nested_lists_and_dicts_round_trip():
    obj = {"a": [1, 2.5, "x", None, {"b": [True, b"raw"]}], "c": {}, "d": [[], [[3]]]}
    assert round_trip(obj) == obj


def test_tuples_decode_as_lists():
    assert round_trip((1, (2, "three"))) == [1, [2, "three"]]


def test_bytearray_and_memoryview_decode_as_bytes():
    assert round_trip(bytearray(b"ab")) == b"ab"
    assert round_trip(memoryview(b"cd")) == b"cd"


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES)
def test_arrays_of_every_supported_dtype_round_trip(dtype, shape):
    array = sample(dtype, shape)
    result = round_trip(array)
    assert isinstance(result, np.ndarray)
    assert result.dtype == np.dtype(dtype)
    assert result.shape == shape
    np.testing.assert_array_equal(result, array)


@pytest.mark.parametrize("dtype", [d for d in DTYPES if np.dtype(d).itemsize > 1])
def test_big_endian_arrays_decode_to_the_same_values(dtype):
    array = sample(dtype, (2, 3))
    big = array.astype(np.dtype(dtype).newbyteorder(">"))
    assert big.dtype.byteorder == ">"
    result = round_trip(big)
    assert result.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(result, array)
    assert encode(big).tensor.data == array.astype(np.dtype(dtype).newbyteorder("<")).tobytes()


def test_non_contiguous_arrays_round_trip_in_c_order():
    array = np.arange(12, dtype=np.int32).reshape(3, 4).T
    np.testing.assert_array_equal(round_trip(array), array)


def test_decoded_arrays_are_writable():
    result = round_trip(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert result.flags.writeable
    result[0, 0] = 42.0
    assert result[0, 0] == 42.0


def test_decoded_array_does_not_alias_the_message_bytes():
    message = encode(np.arange(4, dtype=np.int64))
    first = decode(message)
    first[:] = -1
    np.testing.assert_array_equal(decode(message), np.arange(4))


@pytest.mark.parametrize(
    "scalar, expected",
    [
        (np.int8(-5), -5),
        (np.uint32(7), 7),
        (np.int64(2**63 - 1), 2**63 - 1),
        (np.uint64(2**63 - 1), 2**63 - 1),
        (np.float32(1.5), 1.5),
        (np.float16(-0.25), -0.25),
        (np.float64(3.25), 3.25),
        (np.bool_(True), True),
        (np.str_("s"), "s"),
        (np.bytes_(b"b"), b"b"),
    ],
    ids=repr,
)
def test_numpy_scalars_round_trip_as_python_values(scalar, expected):
    result = round_trip(scalar)
    assert result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize(
    "previous",
    [np.zeros((4, 5), np.float64), [1, 2, 3], {"a": 1}, "text", 7, None, np.zeros(3, np.int8)],
    ids=lambda p: type(p).__name__,
)
@pytest.mark.parametrize(
    "new",
    [np.arange(3, dtype=np.float32), np.ones((), np.uint8), 5, "x", [True], {"k": [1]}, None, np.arange(3, dtype=">i4")],
    ids=repr,
)
def test_encode_into_overwrites_a_previous_value_of_another_kind(previous, new):
    value = encode(previous)
    encode_into(value, new)
    assert value == encode(new)
    result = decode(value)
    if isinstance(new, np.ndarray):
        np.testing.assert_array_equal(result, new)
        assert result.shape == new.shape
    else:
        assert result == new


def parameter_id(value) -> str:
    """repr, but without the address a plain object's repr holds (two collections must name the same tests)."""
    return "object()" if type(value) is object else repr(value)


@pytest.mark.parametrize("obj", [object(), {1, 2}, 1 + 2j, np.datetime64("2020-01-01"), Exception("x")], ids=parameter_id)
def test_unsupported_types_are_rejected(obj):
    with pytest.raises(ValueCodecError):
        encode(obj)


@pytest.mark.parametrize("array", [np.zeros(2, np.complex64), np.array(["a"]), np.array([None], dtype=object)], ids=str)
def test_arrays_of_unsupported_dtypes_are_rejected(array):
    with pytest.raises(ValueCodecError):
        encode(array)
    with pytest.raises(ValueCodecError):
        encode_into(pb.Value(), array)


def test_unsupported_value_nested_in_a_list_is_rejected():
    with pytest.raises(ValueCodecError):
        encode([1, [2, object()]])


@pytest.mark.parametrize("key", [1, None, b"k", ("t",)], ids=repr)
def test_dict_keys_must_be_strings(key):
    with pytest.raises(ValueCodecError, match="keys"):
        encode({key: 1})


@pytest.mark.parametrize("number", [2**64, -(2**63) - 1, 10**30, -(10**30)], ids=repr)
def test_integers_outside_64_bits_are_rejected(number):
    with pytest.raises(ValueCodecError, match="64 bits"):
        encode(number)


@pytest.mark.parametrize("number", [2**63, 2**64 - 1, np.uint64(2**63), np.uint64(2**64 - 1)], ids=repr)
def test_integers_above_the_signed_range_round_trip_as_unsigned_64_bit(number):
    assert encode(number).WhichOneof("kind") == "uint64"
    result = round_trip(number)
    assert result == int(number)
    assert type(result) is int


def tensor(dtype: int, shape: list[int], data: bytes) -> pb.Tensor:
    message = pb.Tensor(dtype=dtype, data=data)
    message.shape.extend(shape)
    return message


@pytest.mark.parametrize(
    "shape, data",
    [([2, 3], b"\0" * 23), ([2, 3], b"\0" * 25), ([], b""), ([0], b"\0" * 4), ([4], b"\0" * 4)],
    ids=str,
)
def test_tensor_whose_data_length_does_not_match_its_shape_is_rejected(shape, data):
    with pytest.raises(ValueCodecError, match="does not match"):
        decode_tensor(tensor(pb.DTYPE_FLOAT32, shape, data))


@pytest.mark.parametrize("shape", [[-1], [-2, -3], [2, -1, -1]], ids=str)
def test_tensor_with_a_negative_dimension_is_rejected(shape):
    count = abs(math.prod(shape))
    with pytest.raises(ValueCodecError):
        decode_tensor(tensor(pb.DTYPE_UINT8, shape, b"\0" * count))


@pytest.mark.parametrize("code", [pb.DTYPE_UNSPECIFIED, 99])
def test_tensor_with_an_unknown_dtype_code_is_rejected(code):
    value = pb.Value()
    value.tensor.dtype = code
    value.tensor.shape.append(1)
    value.tensor.data = b"\0"
    with pytest.raises(ValueCodecError, match="dtype"):
        decode(value)


def nested_lists(levels: int):
    obj = None
    for _ in range(levels):
        obj = [obj]
    return obj


def test_nesting_up_to_max_depth_is_accepted():
    obj = nested_lists(MAX_DEPTH)
    assert round_trip(obj) == obj


def test_encoding_nesting_deeper_than_max_depth_is_rejected():
    with pytest.raises(ValueCodecError, match="deep"):
        encode(nested_lists(MAX_DEPTH + 1))
    with pytest.raises(ValueCodecError, match="deep"):
        encode({"a": nested_lists(MAX_DEPTH)})


def test_decoding_nesting_deeper_than_max_depth_is_rejected():
    root = pb.Value()
    current = root
    for _ in range(MAX_DEPTH + 1):
        current = current.list.items.add()
    current.int64 = 1
    with pytest.raises(ValueCodecError, match="deep"):
        decode(pb.Value.FromString(root.SerializeToString()))


def test_empty_value_message_decodes_to_none():
    assert decode(pb.Value()) is None
