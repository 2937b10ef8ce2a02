"""Converting a policy's action into what a gymnasium action space holds."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from epg_sdk.benchmark import InvalidAction
from epg_sdk.gym_adapter import coerce_action

DISCRETE = spaces.Discrete(2)
BOX1 = spaces.Box(-1.0, 1.0, (1,), dtype=np.float32)
BOX23 = spaces.Box(-1.0, 1.0, (2, 3), dtype=np.float32)
DICT = spaces.Dict({"move": spaces.Discrete(3), "force": BOX1})
TUPLE = spaces.Tuple((spaces.Discrete(2), BOX1))


@pytest.mark.parametrize(
    "action, expected",
    [(0, 0), (1, 1), (np.int64(1), 1), (np.int8(0), 0), (np.uint8(1), 1), (1.0, 1), (np.float32(0.0), 0), ([1], 1), (np.array([0]), 0), (np.array(1), 1)],
    ids=repr,
)
def test_discrete_accepts_integers_and_integral_numbers(action, expected):
    result = coerce_action(DISCRETE, action)
    assert result == expected
    assert DISCRETE.contains(np.int64(result))


def test_discrete_with_a_start_accepts_its_own_range():
    space = spaces.Discrete(3, start=-1)
    assert [coerce_action(space, a) for a in (-1, 0, 1)] == [-1, 0, 1]
    with pytest.raises(InvalidAction):
        coerce_action(space, 2)


@pytest.mark.parametrize(
    "action",
    [2, -1, np.int64(2), 2.0, 10**30, 1.5, 0.5, float("nan"), float("inf"), [0, 1], np.zeros((2,)), [], "1", "true", "yes", "", None, {"a": 1}],
    ids=repr,
)
def test_discrete_rejects_everything_else(action):
    with pytest.raises(InvalidAction):
        coerce_action(DISCRETE, action)


@pytest.mark.parametrize("action", [0.5, -1, np.float64(0.25), [0.5], (1.0,), np.array([0.5]), np.array([[0.5]]), 1], ids=repr)
def test_box_of_shape_one_accepts_a_scalar_a_list_or_an_array(action):
    result = coerce_action(BOX1, action)
    assert isinstance(result, np.ndarray)
    assert result.shape == (1,)
    assert result.dtype == np.float32
    assert result[0] == np.float32(np.asarray(action, dtype=np.float64).reshape(-1)[0])


def test_box_of_shape_two_by_three_accepts_nested_lists_and_arrays():
    nested = [[0.0, 0.1, 0.2], [-0.1, -0.2, 1.0]]
    from_list = coerce_action(BOX23, nested)
    from_array = coerce_action(BOX23, np.array(nested, dtype=np.float64))
    assert from_list.shape == from_array.shape == (2, 3)
    np.testing.assert_array_equal(from_list, np.array(nested, dtype=np.float32))
    np.testing.assert_array_equal(from_array, from_list)


@pytest.mark.parametrize("action", [1.5, -1.01, [2.0], np.array([-3.0])], ids=repr)
def test_box_rejects_values_out_of_range(action):
    with pytest.raises(InvalidAction):
        coerce_action(BOX1, action)


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
@pytest.mark.parametrize("action", [float("nan"), float("inf"), -float("inf"), [np.nan], 1e39], ids=repr)
def test_box_rejects_nan_and_infinity(action):
    with pytest.raises(InvalidAction):
        coerce_action(BOX1, action)


def test_box_rejects_nan_inside_a_larger_array():
    action = np.zeros((2, 3))
    action[1, 2] = np.nan
    with pytest.raises(InvalidAction):
        coerce_action(BOX23, action)


@pytest.mark.parametrize(
    "action",
    [[0.1, 0.2], np.zeros((2, 2)), np.zeros((3, 3)), [[0.1, 0.2, 0.3], [0.1]], 0.0],
    ids=["two values", "2x2", "3x3", "ragged", "scalar"],
)
def test_box_rejects_a_wrong_number_of_values(action):
    with pytest.raises(InvalidAction):
        coerce_action(BOX23, action)


@pytest.mark.parametrize(
    "action",
    [np.arange(6, dtype=np.float32).reshape(3, 2) / 10, [[0.0, 0.1], [0.2, 0.3], [0.4, 0.5]]],
    ids=["3x2 array", "3x2 nested list"],
)
def test_box_rejects_a_transposed_action_instead_of_silently_reshaping_it(action):
    with pytest.raises(InvalidAction):
        coerce_action(BOX23, action)


def parameter_id(value) -> str:
    """repr, but without the address a plain object's repr holds (two collections must name the same tests)."""
    return "object()" if type(value) is object else repr(value)


@pytest.mark.parametrize("action", ["true", "yes", "", "left", None, object(), {"x": 1}], ids=parameter_id)
def test_box_rejects_nonsense(action):
    with pytest.raises(InvalidAction):
        coerce_action(BOX1, action)


def test_dict_space_coerces_each_entry():
    result = coerce_action(DICT, {"move": 2, "force": 0.5})
    assert set(result) == {"move", "force"}
    assert result["move"] == 2
    np.testing.assert_array_equal(result["force"], np.array([0.5], dtype=np.float32))


@pytest.mark.parametrize(
    "action",
    [{"move": 2}, {"move": 2, "force": 0.5, "extra": 1}, {"move": 3, "force": 0.5}, {"move": 0, "force": 2.0}, [2, 0.5], "move"],
    ids=repr,
)
def test_dict_space_rejects_missing_extra_or_invalid_entries(action):
    with pytest.raises(InvalidAction):
        coerce_action(DICT, action)


@pytest.mark.parametrize("action", [[1, 0.5], (1, [0.5]), (np.int64(0), np.array([-1.0]))], ids=repr)
def test_tuple_space_coerces_each_element(action):
    result = coerce_action(TUPLE, action)
    assert isinstance(result, tuple)
    assert len(result) == 2
    assert result[0] == int(np.asarray(action[0]))
    assert result[1].shape == (1,)


@pytest.mark.parametrize("action", [[1], [1, 0.5, 0], [2, 0.5], [1, 5.0], {"0": 1, "1": 0.5}, "ab"], ids=repr)
def test_tuple_space_rejects_wrong_length_or_invalid_elements(action):
    with pytest.raises(InvalidAction):
        coerce_action(TUPLE, action)


def test_coerced_actions_are_contained_in_their_space():
    for space, action in [(DISCRETE, np.int32(1)), (BOX1, 0.25), (BOX23, np.zeros((2, 3))), (DICT, {"move": 1, "force": [0.0]})]:
        result = coerce_action(space, action)
        if isinstance(space, spaces.Discrete):
            result = np.int64(result)
        assert space.contains(result)
