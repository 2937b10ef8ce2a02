"""How an agent's index selector becomes the Episodes it selects, and the canonical form it is shown in."""

from __future__ import annotations

import random

import pytest

from orchestrator.kernel.rejections import RejectionCode, RequestRejected
from orchestrator.kernel.selectors import SelectorError, format_selector, parse_selector

POOL = 32


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0:8,12,20:24", (*range(0, 8), 12, *range(20, 24))),
        ("0", (0,)),
        ("31", (31,)),
        ("0:32", tuple(range(32))),
        ("0:1", (0,)),
        ("3,5,7", (3, 5, 7)),
        ("0:2,2:4", (0, 1, 2, 3)),
        ("0:2,2", (0, 1, 2)),
        (" 0 : 2 ", (0, 1)),
        ("\t4 ,\t6:8 ", (4, 6, 7)),
        ("1 , 2", (1, 2)),
        ("007", (7,)),
        ("00:03", (0, 1, 2)),
    ],
)
def test_valid_selectors_expand_to_strictly_increasing_indices(text, expected):
    assert parse_selector(text, POOL) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        " ",
        "\t",
        "0,,1",
        ",0",
        "0,",
        ",",
        "a",
        "1a",
        "0x1",
        "1.5",
        "1e3",
        "-1",
        "+1",
        "-1:3",
        "0:+3",
        "1:1",
        "5:2",
        "0:",
        ":4",
        ":",
        "0:2:4",
        "0::2",
        "0;1",
        "0 1",
        "1 2:3",
        "0\n",
        "\u0661",  # an Arabic-Indic digit: only 0-9 are digits here
        "０",  # a fullwidth digit
    ],
)
def test_malformed_selectors_are_invalid_selector(text):
    with pytest.raises(SelectorError) as caught:
        parse_selector(text, POOL)
    assert caught.value.code is RejectionCode.INVALID_SELECTOR
    assert caught.value.message


@pytest.mark.parametrize(
    ("text", "index"),
    [
        ("3,2", "2"),
        ("0:4,3", "3"),
        ("0:4,2:6", "2"),
        ("1,1", "1"),
        ("5:8,7", "7"),
        ("10,0:4", "0"),
    ],
)
def test_indices_that_are_not_strictly_increasing_are_invalid_and_the_message_names_the_index(text, index):
    with pytest.raises(SelectorError) as caught:
        parse_selector(text, POOL)
    assert caught.value.code is RejectionCode.INVALID_SELECTOR
    assert f"index {index} " in caught.value.message


@pytest.mark.parametrize("text", ["32", "0:33", "30:40", "0,40", "100", "99999999999999999999999", "1" * 6000, "0:" + "9" * 6000])
def test_indices_outside_the_pool_are_index_out_of_range(text):
    with pytest.raises(SelectorError) as caught:
        parse_selector(text, POOL)
    assert caught.value.code is RejectionCode.INDEX_OUT_OF_RANGE
    assert "31" in caught.value.message
    assert len(caught.value.message) < 300


def test_a_malformed_item_anywhere_wins_over_an_index_out_of_range_before_it():
    with pytest.raises(SelectorError) as caught:
        parse_selector("40,a", POOL)
    assert caught.value.code is RejectionCode.INVALID_SELECTOR


def test_an_empty_range_made_of_huge_numbers_is_still_a_malformed_item():
    with pytest.raises(SelectorError) as caught:
        parse_selector("9" * 5000 + ":" + "1" * 5000, POOL)
    assert caught.value.code is RejectionCode.INVALID_SELECTOR


def test_items_are_checked_left_to_right_for_range_and_order():
    with pytest.raises(SelectorError) as first:
        parse_selector("40,2", POOL)
    assert first.value.code is RejectionCode.INDEX_OUT_OF_RANGE
    with pytest.raises(SelectorError) as second:
        parse_selector("5,3,40", POOL)
    assert second.value.code is RejectionCode.INVALID_SELECTOR


def test_the_pool_bound_is_exact():
    assert parse_selector("0:1", 1) == (0,)
    assert parse_selector("0", 1) == (0,)
    with pytest.raises(SelectorError) as caught:
        parse_selector("1", 1)
    assert caught.value.code is RejectionCode.INDEX_OUT_OF_RANGE
    assert parse_selector("9:10", 10) == (9,)
    with pytest.raises(SelectorError):
        parse_selector("9:11", 10)


def test_a_selector_error_is_a_request_rejected_so_callers_catch_one_type():
    with pytest.raises(RequestRejected) as caught:
        parse_selector("nope", POOL)
    assert isinstance(caught.value, SelectorError)
    assert str(caught.value).startswith("invalid_selector: ")


def test_text_that_is_not_a_string_is_an_invalid_selector():
    with pytest.raises(SelectorError) as caught:
        parse_selector(3, POOL)  # type: ignore[arg-type]
    assert caught.value.code is RejectionCode.INVALID_SELECTOR


@pytest.mark.parametrize("pool_size", [0, -1, True, 2.0])
def test_a_pool_size_that_is_not_a_positive_integer_is_a_programming_error(pool_size):
    with pytest.raises(ValueError):
        parse_selector("0", pool_size)


@pytest.mark.parametrize(
    ("indices", "text"),
    [
        ((0, 1, 2, 5), "0:3,5"),
        ((0,), "0"),
        ((5, 6), "5:7"),
        ((1, 3, 5), "1,3,5"),
        ((0, 1, 2, 3, 4, 5, 6, 7, 12, 20, 21, 22, 23), "0:8,12,20:24"),
        (tuple(range(32)), "0:32"),
        ((0, 2, 3, 4, 9), "0,2:5,9"),
    ],
)
def test_format_gives_the_compact_canonical_form(indices, text):
    assert format_selector(indices) == text
    assert parse_selector(text, POOL) == indices


def test_format_accepts_any_iterable_of_indices():
    assert format_selector(iter([4, 5, 6])) == "4:7"
    assert format_selector(range(3, 6)) == "3:6"


@pytest.mark.parametrize("indices", [(), (1, 1), (2, 1), (-1, 0), (0, 1.0), (True,), ("1",)])
def test_format_refuses_what_no_selector_could_name(indices):
    with pytest.raises(ValueError):
        format_selector(indices)


def test_parse_of_format_is_the_identity_on_random_selections():
    rng = random.Random(20240601)
    for _ in range(500):
        pool = rng.randint(1, 64)
        chosen = tuple(sorted(rng.sample(range(pool), rng.randint(1, pool))))
        text = format_selector(chosen)
        assert parse_selector(text, pool) == chosen
        assert format_selector(parse_selector(text, pool)) == text


def test_format_of_parse_is_canonical_whatever_the_spelling():
    assert format_selector(parse_selector(" 0 , 1 ,2, 3:5 , 7", POOL)) == "0:5,7"
    assert format_selector(parse_selector("0:1,1:2,2:3", POOL)) == "0:3"
