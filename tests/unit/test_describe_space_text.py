"""Text spaces in the gymnasium adapter: their public description, and text actions."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from epg_sdk.benchmark import InvalidAction
from epg_sdk.gym_adapter import coerce_action, describe_space
from epg_sdk.protocol import values


class PhraseSpace(spaces.Space[str]):
    """A space of strings that is not gymnasium's Text (as environments define their own)."""

    def __init__(self, phrases: tuple[str, ...]) -> None:
        self.phrases = phrases
        super().__init__(dtype=str)

    def sample(self, mask=None, probability=None) -> str:
        return self.phrases[int(self.np_random.integers(len(self.phrases)))]

    def contains(self, x) -> bool:
        return x in self.phrases


def test_gymnasium_text_is_described_with_its_lengths_and_characters():
    space = spaces.Text(min_length=2, max_length=12, charset="cab")
    assert describe_space(space) == {"type": "text", "min_length": 2, "max_length": 12, "charset": "abc"}


def test_gymnasium_text_with_its_default_charset_lists_every_character():
    description = describe_space(spaces.Text(40))
    assert (description["min_length"], description["max_length"]) == (1, 40)
    assert set(description["charset"]) == set("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def test_any_space_of_str_is_described_as_text():
    assert describe_space(PhraseSpace(("reach the goal", "pick up the key"))) == {"type": "text"}


def test_a_space_without_str_dtype_is_still_unsupported():
    class Opaque(spaces.Space):
        pass

    with pytest.raises(TypeError, match="unsupported gymnasium space"):
        describe_space(Opaque())


def test_dict_observation_with_text_is_described_and_encodable():
    space = spaces.Dict({
        "image": spaces.Box(0, 255, (7, 7, 3), dtype=np.uint8),
        "direction": spaces.Discrete(4),
        "mission": PhraseSpace(("reach the goal",)),
    })
    description = describe_space(space)
    assert description["type"] == "dict"
    assert description["spaces"]["mission"] == {"type": "text"}
    assert description["spaces"]["direction"] == {"type": "discrete", "n": 4, "start": 0}
    assert description["spaces"]["image"]["shape"] == [7, 7, 3]
    decoded = values.decode(values.encode(description))
    assert decoded["spaces"]["mission"] == {"type": "text"}
    np.testing.assert_array_equal(decoded["spaces"]["image"]["high"], np.full((7, 7, 3), 255, dtype=np.uint8))


def test_text_observation_round_trips_through_the_codec_as_str():
    observation = {"image": np.arange(147, dtype=np.uint8).reshape(7, 7, 3), "direction": np.int64(3), "mission": "reach the goal"}
    decoded = values.decode(values.encode(observation))
    assert set(decoded) == {"image", "direction", "mission"}
    assert type(decoded["mission"]) is str and decoded["mission"] == "reach the goal"
    assert type(decoded["direction"]) is int and decoded["direction"] == 3
    assert decoded["image"].dtype == np.uint8 and decoded["image"].shape == (7, 7, 3)
    np.testing.assert_array_equal(decoded["image"], observation["image"])


@pytest.mark.parametrize("action", ["ab", "cabba", np.str_("abc")], ids=repr)
def test_text_action_accepts_a_str_of_the_space(action):
    result = coerce_action(spaces.Text(min_length=1, max_length=5, charset="abc"), action)
    assert type(result) is str and result == str(action)


@pytest.mark.parametrize("action", ["", "abcabc", "abd", b"ab", 7, None, ["a"], np.array(["ab"])], ids=repr)
def test_text_action_rejects_anything_else(action):
    with pytest.raises(InvalidAction):
        coerce_action(spaces.Text(min_length=1, max_length=5, charset="abc"), action)


def test_text_inside_a_dict_action_is_checked_by_its_own_space():
    space = spaces.Dict({"say": PhraseSpace(("yes", "no")), "move": spaces.Discrete(2)})
    assert coerce_action(space, {"say": "yes", "move": 1}) == {"say": "yes", "move": 1}
    with pytest.raises(InvalidAction):
        coerce_action(space, {"say": "maybe", "move": 1})
