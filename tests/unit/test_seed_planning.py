"""Deterministic, disjoint Episode seed plans."""

from __future__ import annotations

import pytest

from epg_sdk.planning import SPLITS, plan_seeds


def test_plan_is_deterministic_for_a_split_and_seed():
    assert plan_seeds("train", 7, 50) == plan_seeds("train", 7, 50)


def test_shorter_plan_is_a_prefix_of_a_longer_one():
    assert plan_seeds("validation", 3, 10) == plan_seeds("validation", 3, 40)[:10]


def test_plan_depends_on_the_run_seed():
    assert plan_seeds("train", 1, 20) != plan_seeds("train", 2, 20)


def test_plan_has_the_requested_number_of_distinct_integer_seeds():
    seeds = plan_seeds("test", 11, 500)
    assert len(seeds) == 500
    assert len(set(seeds)) == 500
    assert all(type(s) is int and s >= 0 for s in seeds)


def test_zero_count_gives_an_empty_plan():
    assert plan_seeds("train", 0, 0) == []


def test_splits_never_share_a_seed_across_many_run_seeds():
    by_split = {split: set() for split in SPLITS}
    for run_seed in range(200):
        for split in SPLITS:
            by_split[split].update(plan_seeds(split, run_seed, 10))
    assert all(len(seeds) > 1500 for seeds in by_split.values())
    assert not by_split["train"] & by_split["validation"]
    assert not by_split["train"] & by_split["test"]
    assert not by_split["validation"] & by_split["test"]


def test_seeds_of_split_k_are_congruent_to_k_modulo_three():
    for offset, split in enumerate(SPLITS):
        assert {s % 3 for s in plan_seeds(split, 5, 100)} == {offset}


def test_the_three_splits_are_train_validation_test():
    assert SPLITS == ("train", "validation", "test")


@pytest.mark.parametrize("split", ["training", "Train", "", "val"])
def test_unknown_split_is_rejected(split):
    with pytest.raises(ValueError, match="unknown split"):
        plan_seeds(split, 0, 1)


def test_negative_count_is_rejected():
    with pytest.raises(ValueError, match="negative"):
        plan_seeds("train", 0, -1)
