"""The aggregate rank score of the published tables: pure functions of raw held-out scores, no I/O.

In each Benchmark every entry (agent) is ranked by its raw held-out score,
the metric's direction respected; tied entries share the best of their ranks
(1 + the number of entries strictly better). An entry scores (N - rank) / (N - 1)
for N entries (1 when it is the only one), and its aggregate is the mean over
Benchmarks. An entry without a score (its Run assessed nothing or has not
ended), or whose score is not a finite number (NaN, an infinity), ranks below
every scored entry, whatever the direction. Wins count first ranks, top-2 ranks of
at most 2; both include ties.

>>> standings([BenchmarkScores(benchmark="b", family="f", maximize=True, scores={"x": 1.0, "y": 2.0})]).overall[0].agent
'y'
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchmarkScores:
    """The raw held-out score of each agent on one Benchmark (None: no score)."""

    benchmark: str
    family: str
    maximize: bool
    scores: Mapping[str, float | None]


@dataclass(frozen=True, slots=True, kw_only=True)
class Placing:
    """An agent's rank on one Benchmark and what it contributes to the aggregate."""

    rank: int
    rank_score: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Standing:
    """An agent over a set of Benchmarks: mean rank score, wins, top-2 placings, Benchmarks counted."""

    agent: str
    rank_score: float
    wins: int
    top2: int
    benchmarks: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Standings:
    """overall and each family's standings, best first (ties: the agents' order); placings per Benchmark and agent."""

    overall: tuple[Standing, ...]
    families: Mapping[str, tuple[Standing, ...]]
    placings: Mapping[str, Mapping[str, Placing]]


def ranks(scores: Mapping[str, float | None], maximize: bool) -> dict[str, int]:
    """Each entry's rank: 1 + the entries strictly better; every entry without a finite score after all scored ones."""
    finite = {agent: value for agent, value in scores.items() if value is not None and math.isfinite(value)}
    scored = list(finite.values())

    def better(a: float, b: float) -> bool:
        return a > b if maximize else a < b

    return {
        agent: 1 + sum(1 for other in scored if better(other, finite[agent])) if agent in finite else len(scored) + 1
        for agent in scores
    }


def placings(entry: BenchmarkScores) -> dict[str, Placing]:
    """Rank and rank score of every agent on one Benchmark."""
    count = len(entry.scores)
    return {
        agent: Placing(rank=rank, rank_score=1.0 if count == 1 else (count - rank) / (count - 1))
        for agent, rank in ranks(entry.scores, entry.maximize).items()
    }


def standings(entries: Sequence[BenchmarkScores]) -> Standings:
    """The aggregate over entries, overall and per family (families in order of first appearance)."""
    placed = {entry.benchmark: placings(entry) for entry in entries}
    agents = list(dict.fromkeys(agent for entry in entries for agent in entry.scores))
    families = list(dict.fromkeys(entry.family for entry in entries))
    return Standings(
        overall=_standing(agents, [placed[entry.benchmark] for entry in entries]),
        families={family: _standing(agents, [placed[e.benchmark] for e in entries if e.family == family]) for family in families},
        placings=placed,
    )


def _standing(agents: Sequence[str], tables: Sequence[Mapping[str, Placing]]) -> tuple[Standing, ...]:
    result = []
    for agent in agents:
        mine = [table[agent] for table in tables if agent in table]
        result.append(Standing(
            agent=agent, rank_score=sum(p.rank_score for p in mine) / len(mine) if mine else 0.0,
            wins=sum(1 for p in mine if p.rank == 1), top2=sum(1 for p in mine if p.rank <= 2), benchmarks=len(mine),
        ))
    order = {agent: number for number, agent in enumerate(agents)}
    return tuple(sorted(result, key=lambda s: (-s.rank_score, order[s.agent])))
