"""The exact `policy/v2` view of epg.v1.Value (encode_exact/decode_exact) and what our ABI's view makes of its new kinds."""

from __future__ import annotations

import enum
import math
import subprocess
import sys
from collections import OrderedDict

import numpy as np
import pytest
from support.exact_values import assert_exactly_equal, evopolicygym_root

from epg.v1 import values_pb2 as pb
from epg_sdk.protocol.values import MAX_DEPTH, ValueCodecError, decode, decode_exact, encode, encode_exact, encode_exact_into

if str(evopolicygym_root()) not in sys.path:
    sys.path.insert(0, str(evopolicygym_root()))

from evopolicygym.policy import TensorValue  # noqa: E402

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32", "float64"]


def exact_round_trip(obj):
    return decode_exact(pb.Value.FromString(encode_exact(obj).SerializeToString()))


def tensor_value(dtype: str, values: list) -> TensorValue:
    return TensorValue(dtype=dtype, shape=(len(values),), data=np.array(values, dtype=np.dtype(dtype).newbyteorder("<")).tobytes())


@pytest.mark.parametrize(
    "obj",
    [None, True, False, 0, -1, 2**63 - 1, 2**63, 2**64 - 1, -(2**63), 0.0, -0.0, -2.5, 1e300, 5e-324, "", "héllo\0", b"", b"\x00\xff", [], (), {}],
    ids=repr,
)
def test_every_exact_scalar_and_empty_container_round_trips_with_its_own_type(obj):
    result = exact_round_trip(obj)
    assert_exactly_equal(result, obj)
    if type(obj) is float:
        assert math.copysign(1.0, result) == math.copysign(1.0, obj)


def test_integers_above_the_signed_range_travel_as_uint64_and_the_rest_as_int64():
    assert encode_exact(2**63 - 1).WhichOneof("kind") == "int64"
    assert encode_exact(-(2**63)).WhichOneof("kind") == "int64"
    assert encode_exact(2**63).WhichOneof("kind") == "uint64"
    assert encode_exact(2**64 - 1).uint64 == 2**64 - 1


@pytest.mark.parametrize("number", [2**64, -(2**63) - 1, 10**30, -(10**30)], ids=repr)
def test_integers_outside_signed_and_unsigned_64_bits_are_refused(number):
    with pytest.raises(ValueCodecError, match="64 bits"):
        encode_exact(number)


def test_nested_tuples_and_lists_stay_what_they_were():
    obj = {"a": (1, [2, (3, ())]), "b": [(), [], ([],)], "c": ((("deep",),),)}
    assert_exactly_equal(exact_round_trip(obj), obj)
    assert encode_exact((1,)).WhichOneof("kind") == "tuple"
    assert encode_exact([1]).WhichOneof("kind") == "list"


def test_maps_decode_with_their_keys_in_utf8_byte_order():
    obj = {"b": 1, "é": 2, "A": 3, "a": 4, "": 5}
    assert list(exact_round_trip(obj)) == sorted(obj, key=str.encode)


@pytest.mark.parametrize("dtype", DTYPES)
def test_tensor_values_of_every_dtype_round_trip_as_tensor_values(dtype):
    kind = np.dtype(dtype).kind
    if kind == "b":
        sample = [True, False, True]
    elif kind in "iu":
        info = np.iinfo(dtype)
        sample = [int(info.max), int(info.min), 1]
    else:
        info = np.finfo(dtype)
        sample = [float(info.max), float(info.min), -0.5]
    original = tensor_value(dtype, sample)
    result = exact_round_trip({"x": (original,)})["x"][0]
    assert type(result) is TensorValue
    assert (result.dtype, result.shape, result.data) == (original.dtype, original.shape, original.data)


def test_bool_tensor_data_is_bytes_of_zero_and_one():
    value = encode_exact(TensorValue(dtype="bool", shape=(2, 2), data=b"\x01\x00\x00\x01"))
    assert value.tensor.dtype == pb.DTYPE_BOOL
    assert list(value.tensor.shape) == [2, 2]
    assert value.tensor.data == b"\x01\x00\x00\x01"


def forged_tensor(dtype: str, shape: tuple, data: bytes) -> TensorValue:
    """A TensorValue whose fields were changed after its checks ran (a frozen dataclass does not stop object.__setattr__)."""
    tensor = TensorValue(dtype="uint8", shape=(0,), data=b"")
    object.__setattr__(tensor, "dtype", dtype)
    object.__setattr__(tensor, "shape", shape)
    object.__setattr__(tensor, "data", data)
    return tensor


@pytest.mark.parametrize(
    "dtype, shape, data",
    [
        ("bool", (2,), b"\x01\x02"),
        ("float32", (1,), np.array([np.nan], "<f4").tobytes()),
        ("float64", (2,), np.array([1.0, np.inf], "<f8").tobytes()),
        ("float16", (1,), np.array([-np.inf], "<f2").tobytes()),
        ("int32", (2,), b"\0" * 4),
        ("complex64", (1,), b"\0" * 8),
        ("uint8", [2], b"\0\0"),
        ("uint8", (-1,), b""),
        ("uint8", (2,), bytearray(b"\0\0")),
        ("uint8", (True,), b"\0"),
    ],
    ids=str,
)
def test_a_tensor_value_that_breaks_its_own_rules_is_refused(dtype, shape, data):
    with pytest.raises(ValueCodecError):
        encode_exact(forged_tensor(dtype, shape, data))
    with pytest.raises(ValueCodecError):
        encode(forged_tensor(dtype, shape, data))


def test_a_class_merely_named_tensor_value_is_refused():
    class TensorValue:  # noqa: N801 - the name is the point
        dtype, shape, data = "uint8", (1,), b"\0"

    with pytest.raises(ValueCodecError, match="not an exact policy value"):
        encode_exact(TensorValue())


@pytest.mark.parametrize(
    "obj",
    [np.int64(1), np.uint64(2**63), np.float64(1.0), np.bool_(True), np.str_("s"), np.bytes_(b"b"), np.zeros(2), [1, np.int32(2)], {"a": (np.float32(0.5),)}],
    ids=repr,
)
def test_numpy_values_are_refused(obj):
    with pytest.raises(ValueCodecError, match="not an exact policy value"):
        encode_exact(obj)


class MyInt(int):
    pass


class MyStr(str):
    pass


class MyList(list):
    pass


class Colour(enum.IntEnum):
    RED = 1


@pytest.mark.parametrize(
    "obj",
    [MyInt(1), MyStr("s"), MyList([1]), Colour.RED, OrderedDict(a=1), bytearray(b"x"), memoryview(b"x"), {1, 2}, frozenset(), 1 + 2j,
     object(), range(3), [MyInt(2)]],
    ids=lambda obj: type(obj).__name__,
)
def test_subclasses_and_other_carriers_are_refused(obj):
    with pytest.raises(ValueCodecError, match="not an exact policy value"):
        encode_exact(obj)


@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf], ids=repr)
def test_floats_that_are_not_finite_are_refused_both_ways(number):
    with pytest.raises(ValueCodecError, match="finite"):
        encode_exact([1.0, {"x": number}])
    with pytest.raises(ValueCodecError, match="finite"):
        decode_exact(pb.Value(float64=number))


@pytest.mark.parametrize("key", [1, None, b"k", ("t",), MyStr("k")], ids=repr)
def test_map_keys_must_be_exact_strings(key):
    with pytest.raises(ValueCodecError, match="keys"):
        encode_exact({key: 1})


def test_text_that_is_not_utf8_is_refused_as_a_codec_error():
    with pytest.raises(ValueCodecError, match="UTF-8"):
        encode_exact(["\udc80"])


def nested(levels: int, container=list):
    obj = None
    for _ in range(levels):
        obj = container([obj])
    return obj


@pytest.mark.parametrize("container", [list, tuple])
def test_nesting_up_to_max_depth_is_accepted_and_deeper_refused(container):
    assert_exactly_equal(exact_round_trip(nested(MAX_DEPTH, container)), nested(MAX_DEPTH, container))
    with pytest.raises(ValueCodecError, match="deep"):
        encode_exact(nested(MAX_DEPTH + 1, container))
    with pytest.raises(ValueCodecError, match="deep"):
        encode_exact({"a": nested(MAX_DEPTH, container)})


def test_a_list_that_contains_itself_is_refused():
    loop: list = []
    loop.append(loop)
    with pytest.raises(ValueCodecError, match="deep"):
        encode_exact(loop)


def test_decoding_nesting_deeper_than_max_depth_is_refused():
    root = pb.Value()
    current = root
    for _ in range(MAX_DEPTH + 1):
        current = current.tuple.items.add()
    current.int64 = 1
    with pytest.raises(ValueCodecError, match="deep"):
        decode_exact(pb.Value.FromString(root.SerializeToString()))


def test_a_value_without_a_kind_is_not_an_exact_value():
    with pytest.raises(ValueCodecError, match="without a kind"):
        decode_exact(pb.Value())


@pytest.mark.parametrize(
    "dtype, shape, data",
    [(pb.DTYPE_FLOAT32, [2], b"\0" * 7), (pb.DTYPE_UINT8, [-1], b""), (pb.DTYPE_UNSPECIFIED, [1], b"\0"), (pb.DTYPE_BOOL, [1], b"\x07")],
    ids=str,
)
def test_a_malformed_tensor_message_is_refused_by_decode_exact(dtype, shape, data):
    value = pb.Value()
    value.tensor.dtype = dtype
    value.tensor.shape.extend(shape)
    value.tensor.data = data
    with pytest.raises(ValueCodecError):
        decode_exact(value)


@pytest.mark.parametrize("previous", [[1, 2], (3,), {"a": 1}, "x", 7, None, 2**64 - 1], ids=repr)
@pytest.mark.parametrize("new", [(True,), [1.5], {"k": (1,)}, 2**63, b"", None], ids=repr)
def test_encode_exact_into_overwrites_a_previous_value_of_another_kind(previous, new):
    value = encode_exact(previous)
    encode_exact_into(value, new)
    assert value == encode_exact(new)
    assert_exactly_equal(decode_exact(value), new)


def test_our_abi_still_writes_tuples_as_lists_byte_for_byte():
    assert encode((1, (2, "three"))).SerializeToString() == encode([1, [2, "three"]]).SerializeToString()


def test_our_abi_reads_the_new_kinds_as_lists_and_ints():
    message = encode_exact({"t": (1, (2, 2**64 - 1)), "l": [()]})
    assert decode(message) == {"t": [1, [2, 2**64 - 1]], "l": [[]]}
    assert type(decode(message)["t"]) is list


def test_our_abi_encodes_unsigned_64_bit_integers_and_tensor_values():
    assert decode(encode(2**64 - 1)) == 2**64 - 1
    assert decode(encode(np.uint64(2**64 - 1))) == 2**64 - 1
    array = decode(encode(tensor_value("int16", [1, -2, 3])))
    assert isinstance(array, np.ndarray)
    assert array.dtype == np.int16
    np.testing.assert_array_equal(array, [1, -2, 3])


def test_importing_the_codec_does_not_import_evopolicygym():
    code = "import sys, epg_sdk.protocol.values as v; v.encode_exact([1, (2,)]); v.decode_exact(v.encode_exact({'a': 1})); print('evopolicygym' in sys.modules)"
    env_path = ":".join(p for p in sys.path if p)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={"PYTHONPATH": env_path}, check=True)
    assert result.stdout.strip() == "False"
