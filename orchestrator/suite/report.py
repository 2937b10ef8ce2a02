"""The suite report: held-out scores per Benchmark and agent, read from the run directories, and their ranking.

Reading the records is here; the ranking itself is `suite.ranking` (pure). A
Benchmark's direction comes from run.json's `metric`, which the Host writes
from the Benchmark's own spec (never from anything the agent could touch).
With repeats, an entry's score is the mean of its repeats' held-out scores,
with their spread; a repeat without a score is counted as missing.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.records import safe_read
from orchestrator.records import schema as record_schema
from orchestrator.records.events import Phase, SubmissionCompleted, ValidationDone
from orchestrator.records.models import PlannedRunRecord, RunManifest
from orchestrator.records.run_dir import RunDirectory
from orchestrator.records.schema import finite_number
from orchestrator.suite.directory import SuiteDirectory
from orchestrator.suite.ranking import BenchmarkScores, Placing, Standing, standings

REPORT = "epg.suite_report/1"
_PLAIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRow:
    """One Run of the suite as its records stand; problems empty when its run directory is complete."""

    name: str
    benchmark: str
    family: str
    agent: str
    repeat: int
    run_dir: str
    phase: str
    terminal_reason: str | None
    score: float | None
    direction: str | None
    problems: tuple[str, ...]
    unscored: str | None = None  # why a recorded held-out score was not taken (not a finite number)


@dataclass(frozen=True, slots=True, kw_only=True)
class Cell:
    """An agent on a Benchmark: its repeats' held-out scores, their mean and spread, its rank."""

    benchmark: str
    agent: str
    scores: tuple[float, ...]
    repeats: int
    mean: float | None
    stdev: float | None
    low: float | None
    high: float | None
    rank: int
    rank_score: float


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchmarkRow:
    id: str
    family: str
    direction: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SuiteReport:
    suite_dir: str
    name: str
    benchmarks: tuple[BenchmarkRow, ...]
    agents: tuple[str, ...]
    cells: tuple[Cell, ...]
    overall: tuple[Standing, ...]
    families: Mapping[str, tuple[Standing, ...]]
    runs: tuple[RunRow, ...]
    notes: tuple[str, ...]

    @property
    def complete(self) -> bool:
        """Every Run ended and left a complete run directory."""
        return all(not run.problems for run in self.runs)

    def cell(self, benchmark: str, agent: str) -> Cell:
        return next(c for c in self.cells if c.benchmark == benchmark and c.agent == agent)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": REPORT, "suite_dir": self.suite_dir, "name": self.name, "complete": self.complete,
            "benchmarks": [{"id": b.id, "family": b.family, "direction": b.direction} for b in self.benchmarks],
            "agents": list(self.agents),
            "table": [{"benchmark": c.benchmark, "agent": c.agent, "score": c.mean, "scores": list(c.scores), "repeats": c.repeats,
                       "stdev": c.stdev, "min": c.low, "max": c.high, "rank": c.rank, "rank_score": c.rank_score} for c in self.cells],
            "standings": [_standing_json(s, position) for position, s in enumerate(self.overall, 1)],
            "families": {family: [_standing_json(s, position) for position, s in enumerate(rows, 1)] for family, rows in self.families.items()},
            "runs": [{"name": r.name, "benchmark": r.benchmark, "agent": r.agent, "repeat": r.repeat, "run_dir": r.run_dir,
                      "phase": r.phase, "terminal_reason": r.terminal_reason, "score": r.score, "complete": not r.problems,
                      "problems": list(r.problems)} for r in self.runs],
            "notes": list(self.notes),
        }


def _standing_json(standing: Standing, position: int) -> dict[str, Any]:
    return {"position": position, "agent": standing.agent, "rank_score": standing.rank_score, "wins": standing.wins,
            "top2": standing.top2, "benchmarks": standing.benchmarks}


def read_run(directory: SuiteDirectory, planned: PlannedRunRecord) -> RunRow:
    """The Run's row: phase, held-out score and direction from run.json, and what its run directory lacks."""
    records = RunDirectory(directory.run_dir(planned))
    base: dict[str, Any] = {"name": planned.name, "benchmark": str(planned.benchmark), "family": str(planned.family),
            "agent": str(planned.agent), "repeat": planned.repeat or 0, "run_dir": planned.run_dir}
    problem = directory.run_problem(planned)
    if problem is not None:
        return RunRow(**base, phase="unreadable", terminal_reason=None, score=None, direction=None, problems=(problem,))
    if not records.events_path.exists():
        return RunRow(**base, phase="pending", terminal_reason=None, score=None, direction=None, problems=("not started",))
    try:
        manifest = records.read_manifest()
    except record_schema.RecordError as exc:
        return RunRow(**base, phase="unreadable", terminal_reason=None, score=None, direction=None, problems=(str(exc),))
    score = manifest.assessment_score
    recorded = manifest.metric.direction if manifest.metric is not None else None
    direction = recorded if recorded in ("maximize", "minimize") else None
    reason = manifest.terminal_reason
    return RunRow(**base, phase=manifest.current_phase.value, terminal_reason=None if reason is None else str(reason),
                  score=finite_number(score), direction=direction, problems=tuple(missing_records(records, manifest)),
                  unscored=f"held-out score {score!r} is not a finite number" if finite_number(score) is None and score is not None else None)


def missing_records(records: RunDirectory, manifest: RunManifest) -> list[str]:
    """What a finished Run's directory should hold and does not (empty: complete)."""
    if manifest.current_phase is not Phase.DONE:
        return [f"not done (phase {manifest.current_phase.value})"]
    problems = []
    try:
        events = records.events()
    except record_schema.RecordError as exc:
        return [str(exc)]
    wanted = ["spec.yaml", "initial_program", "validation.json"]
    final = manifest.final
    if final is not None:
        wanted.append("assessment.json")
        digest = final.program_digest
        if digest is not None and safe_read.is_digest(digest):
            wanted.append(safe_read.digest_path(digest))
        else:
            problems.append(f"run.json: final.program_digest {str(digest)[:80]!r} is not a Program digest")
    completed = [e.id for e in events if isinstance(e, SubmissionCompleted)]
    problems += [f"events.jsonl: Submission id {i[:80]!r} is not a plain name" for i in completed if not _PLAIN.match(i)]
    wanted += [f"submissions/{i}/record.json" for i in completed if _PLAIN.match(i)]
    problems += [f"{name} is missing" for name in wanted if safe_read.kind(records.root, name) is None]
    if not any(isinstance(e, ValidationDone) for e in events):
        problems.append("events.jsonl has no validation_done")
    return problems


def build_report(suite_dir: Path) -> SuiteReport:
    """Read every Run of the suite and rank the agents. Raises RecordError when suite.json is unreadable."""
    directory = SuiteDirectory(suite_dir)
    manifest = directory.read_manifest()
    rows = tuple(read_run(directory, planned) for planned in manifest.runs)
    benchmarks = list(dict.fromkeys(row.benchmark for row in rows))
    agents = tuple(dict.fromkeys(row.agent for row in rows))
    notes: list[str] = [f"{row.name}: {row.unscored}; ranked as no score" for row in rows if row.unscored]
    benchmark_rows, entries, collected = [], [], {}
    for benchmark in benchmarks:
        mine = [row for row in rows if row.benchmark == benchmark]
        directions = sorted({row.direction for row in mine if row.direction})
        if len(directions) > 1:
            notes.append(f"{benchmark}: its Runs disagree on the metric's direction ({', '.join(directions)}); ranked as {directions[0]}")
        direction = directions[0] if directions else "maximize"
        if not directions and any(row.score is not None for row in mine):
            notes.append(f"{benchmark}: no run.json says the metric's direction; ranked as higher is better")
        benchmark_rows.append(BenchmarkRow(id=benchmark, family=mine[0].family, direction=direction))
        for agent in agents:
            collected[benchmark, agent] = [row for row in mine if row.agent == agent]
        means = {agent: _mean([r.score for r in collected[benchmark, agent] if r.score is not None]) for agent in agents}
        entries.append(BenchmarkScores(benchmark=benchmark, family=mine[0].family, maximize=direction == "maximize", scores=means))
    ranked = standings(entries)
    cells = tuple(_cell(benchmark.id, agent, collected[benchmark.id, agent], ranked.placings[benchmark.id][agent])
                  for benchmark in benchmark_rows for agent in agents)
    return SuiteReport(suite_dir=str(suite_dir), name=manifest.name or "", benchmarks=tuple(benchmark_rows), agents=agents,
                       cells=cells, overall=ranked.overall, families=ranked.families, runs=rows, notes=tuple(notes))


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def _cell(benchmark: str, agent: str, runs: list[RunRow], placing: Placing) -> Cell:
    scores = tuple(run.score for run in runs if run.score is not None)
    return Cell(benchmark=benchmark, agent=agent, scores=scores, repeats=len(runs), mean=_mean(list(scores)),
                stdev=statistics.stdev(scores) if len(scores) > 1 else None, low=min(scores, default=None),
                high=max(scores, default=None), rank=placing.rank, rank_score=placing.rank_score)
