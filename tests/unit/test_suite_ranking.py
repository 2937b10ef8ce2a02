"""The aggregate rank score as published: ranks per Benchmark, ties sharing the best rank, wins and top-2 placings."""

from __future__ import annotations

import pytest

from orchestrator.suite.ranking import BenchmarkScores, ranks, standings

AGENTS = ("GPT-5.5", "Claude Opus 4.7", "MiniMax-M3", "DeepSeek-V4-Pro", "uniform random")
# The published Core16 table: raw mean held-out return, every metric higher-is-better.
PUBLISHED = """
Acrobot            -84.6875   -88.59375  -136.40625  -91.15625  -499.15625
MountainCarCont.   95.216320  98.773559  91.881344   94.477336  -33.359488
BipedalWalker      248.87434  -15.844270 -80.873676  -97.475003 -100.975808
CarRacing          604.14492  602.33727  233.43483   25.198666  -29.627216
Reacher            -3.4726870 -3.9787236 -5.1033840  -6.5057637 -43.771999
HalfCheetah        601.83271  452.02177  606.15363   -0.4676944 -291.843544
Ant                989.58048  990.14909  983.42530   897.99476  -34.602259
Pusher             -37.106300 -38.519779 -39.245447  -54.179745 -147.461739
DoorKey            0.98622314 0.98269653 0          0          0
KeyCorridor        0.91826172 0.92974609 0          0          0
FourRooms          0.6641875  0.70103125 0.4034375  0.0785625  0.041688
ObstructedMaze     0.90359375 0.91132813 0          0          0
Parking            -30.236528 -38.181154 -32.709680 -53.383645 -47.447772
Roundabout         9.8177083  9.3307292  9.5208333  10.203125  7.1875
FetchPush          -18.15625  -19.6875   -25.875    -27.65625  -46.03125
FetchPickAndPlace  -11.8125   -13.34375  -13.21875  -20.5625   -43.75
"""
FAMILIES = {"Acrobot": "classic", "MountainCarCont.": "classic", "DoorKey": "MiniGrid", "KeyCorridor": "MiniGrid",
            "FourRooms": "MiniGrid", "ObstructedMaze": "MiniGrid"}


def published_entries() -> list[BenchmarkScores]:
    entries = []
    for line in PUBLISHED.strip().splitlines():
        benchmark, *values = line.split()
        entries.append(BenchmarkScores(benchmark=benchmark, family=FAMILIES.get(benchmark, "other"), maximize=True,
                                       scores=dict(zip(AGENTS, map(float, values), strict=True))))
    return entries


def test_the_published_core16_table_gets_its_published_aggregate_rank_scores():
    result = standings(published_entries())
    assert [(s.agent, round(s.rank_score, 4)) for s in result.overall] == [
        ("GPT-5.5", 0.8906), ("Claude Opus 4.7", 0.7500), ("MiniMax-M3", 0.5312), ("DeepSeek-V4-Pro", 0.3594), ("uniform random", 0.1094),
    ]
    assert all(s.benchmarks == 16 for s in result.overall)


def test_wins_and_top2_count_tied_first_places_for_everyone_tied():
    result = {s.agent: s for s in standings(published_entries()).overall}
    assert [(result[a].wins, result[a].top2) for a in AGENTS] == [(9, 16), (5, 12), (1, 3), (1, 1), (0, 0)]


def test_three_zeros_share_the_best_of_their_ranks():
    placings = standings(published_entries()).placings["DoorKey"]
    assert [placings[a].rank for a in AGENTS] == [1, 2, 3, 3, 3]
    assert [placings[a].rank_score for a in AGENTS] == [1.0, 0.75, 0.5, 0.5, 0.5]


def test_per_family_standings_use_only_that_familys_benchmarks():
    families = standings(published_entries()).families
    assert list(families) == ["classic", "other", "MiniGrid"]
    classic = {s.agent: s for s in families["classic"]}
    # Acrobot: ranks 1 2 4 3 5; MountainCarContinuous: 2 1 4 3 5.
    assert classic["GPT-5.5"].rank_score == pytest.approx((1.0 + 0.75) / 2)
    assert classic["MiniMax-M3"].rank_score == pytest.approx(0.25)
    assert (classic["Claude Opus 4.7"].wins, classic["Claude Opus 4.7"].top2, classic["Claude Opus 4.7"].benchmarks) == (1, 2, 2)
    assert families["MiniGrid"][0].agent == "Claude Opus 4.7"


def test_lower_is_better_when_the_metric_says_minimize():
    assert ranks({"a": 3.0, "b": 1.0, "c": 2.0}, maximize=False) == {"a": 3, "b": 1, "c": 2}
    assert ranks({"a": 3.0, "b": 1.0, "c": 2.0}, maximize=True) == {"a": 1, "b": 3, "c": 2}


def test_an_entry_without_a_score_ranks_below_every_scored_one():
    assert ranks({"a": -500.0, "b": None, "c": 1.0, "d": None}, maximize=True) == {"a": 2, "b": 3, "c": 1, "d": 3}
    entry = BenchmarkScores(benchmark="x", family="f", maximize=True, scores={"a": None, "b": 0.0})
    assert {s.agent: s.rank_score for s in standings([entry]).overall} == {"b": 1.0, "a": 0.0}


def test_a_single_entry_scores_one_and_equal_rank_scores_keep_the_agents_order():
    alone = BenchmarkScores(benchmark="x", family="f", maximize=True, scores={"only": 5.0})
    assert standings([alone]).overall[0].rank_score == 1.0
    tie = BenchmarkScores(benchmark="x", family="f", maximize=True, scores={"b": 1.0, "a": 1.0})
    assert [s.agent for s in standings([tie]).overall] == ["b", "a"]


@pytest.mark.parametrize("maximize", [True, False])
@pytest.mark.parametrize("odd", [float("nan"), float("inf"), float("-inf")])
def test_a_score_that_is_not_a_finite_number_ranks_last_whatever_the_direction(maximize, odd):
    assert ranks({"odd": odd, "low": 1.0, "high": 2.0}, maximize=maximize) == {"odd": 3, "low": 2 if maximize else 1, "high": 1 if maximize else 2}
    entry = BenchmarkScores(benchmark="x", family="f", maximize=maximize, scores={"odd": odd, "other": -1e9})
    assert [(s.agent, s.rank_score, s.wins) for s in standings([entry]).overall] == [("other", 1.0, 1), ("odd", 0.0, 0)]
