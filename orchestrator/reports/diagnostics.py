"""The diagnostics of one Run, computed from its records alone: pure functions, no plotting, no engine.

Per Submission: its score and the best so far against the Episodes spent, Episodes and reused pool
indices, policy failure codes, and the size of its Program's change against the Program before it.
Per Run: the area under the best-so-far curve and the score gain per Submission (the paper's
diagnostics), and Validation against Assessment of the candidates.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from orchestrator.kernel.program import Program, ProgramError
from orchestrator.records.models import AssessmentSummary, BudgetRecord, ValidationReport
from orchestrator.records.schema import finite_number
from orchestrator.reports.diffs import program_changes
from orchestrator.reports.run_records import RunRecords, SubmissionRecord, stored_program


@dataclass(frozen=True, slots=True, kw_only=True)
class ProgramChange:
    """How a Program differs from the one before it: files added, removed and changed, and the diff's size."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    lines_added: int = 0
    lines_removed: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    summarised: tuple[str, ...] = ()  # files past reports.diffs' bound: their lines counted, not diffed

    @property
    def files_changed(self) -> int:
        return len(self.added) + len(self.removed) + len(self.changed)


@dataclass(frozen=True, slots=True, kw_only=True)
class SubmissionPoint:
    """One Submission on the Run's curve; score and best are None for an unreadable record."""

    id: str
    number: int
    episodes: int
    episodes_spent: int  # cumulative, this Submission included
    reused_indices: int  # of its indices, how many an earlier Submission had selected already
    score: float | None
    best_so_far: float | None
    gain: float | None  # how much it raised the best so far (0.0 when it did not; None for the first)
    policy_failures: int
    failure_codes: dict[str, int]
    program_digest: str
    change: ProgramChange | None  # against the Program before (the initial Program for the first); None when unreadable
    error: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CandidateResult:
    """A Validation candidate: its train, Validation and (for the selected one) Assessment score."""

    submission_id: str
    train_score: float | None
    validation_score: float | None
    assessment_score: float | None
    selected: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class RunDiagnostics:
    benchmark: str
    primary_metric: str
    direction: str
    budget_episodes: int | None
    episodes_spent: int
    submissions: tuple[SubmissionPoint, ...]
    candidates: tuple[CandidateResult, ...]
    # The best-so-far curve is a step over Episodes spent: each Submission's Episodes count at the best score
    # known once it returned. Its area, from the first scored Submission on, and that area over those Episodes.
    best_so_far_auc: float | None
    best_so_far_mean: float | None
    gain_per_submission: float | None  # (final best - first score) / (Submissions - 1), sign set so that > 0 is better
    initial_assessment_score: float | None
    assessment_score: float | None
    selected: str | None
    terminal_reason: str | None

    def to_json(self) -> dict[str, Any]:
        """As a JSON object; a number that overflowed (scores near 1e308) is null."""
        finite: dict[str, Any] = _finite(asdict(self))
        return finite


def better(a: float, b: float, direction: str) -> bool:
    """True when score a is strictly better than b under direction."""
    return a < b if direction == "minimize" else a > b


def diagnose(run: RunRecords) -> RunDiagnostics:
    """Return the diagnostics of run (see the module docstring)."""
    direction = run.direction
    points: list[SubmissionPoint] = []
    seen: set[int] = set()
    spent = 0
    best: float | None = None
    previous = _program(run, run.manifest.initial_program_digest or "", fallback="initial_program")
    area, counted = 0.0, 0
    programs: dict[str, Program | None] = {}  # each stored Program read once, however many Submissions name it
    first_score: float | None = None
    for record in run.submissions:
        spent += len(record.indices)
        reused = sum(1 for i in record.indices if i in seen)
        seen.update(record.indices)
        score = record.score
        gain = None
        if score is not None:
            if best is None:
                best, first_score = score, score
            else:
                improvement = (score - best) if direction == "maximize" else (best - score)
                gain = max(0.0, improvement)
                if better(score, best, direction):
                    best = score
        if best is not None:
            area += len(record.indices) * best
            counted += len(record.indices)
        if record.program_digest and record.program_digest not in programs:
            programs[record.program_digest] = _program(run, record.program_digest)
        program = programs.get(record.program_digest)
        change = program_change(previous, program) if program is not None and previous is not None else None
        if program is not None:
            previous = program
        points.append(_point(record, spent, reused, best if score is not None else None, gain, change))
    scored = [p for p in points if p.score is not None]
    gain_per = None
    if len(scored) > 1 and first_score is not None and best is not None:
        total = (best - first_score) if direction == "maximize" else (first_score - best)
        gain_per = total / (len(scored) - 1)
    assessment = run.manifest.assessment or AssessmentSummary()
    budget = run.manifest.budget or BudgetRecord()
    return RunDiagnostics(
        benchmark=run.benchmark, primary_metric=run.primary_metric, direction=direction,
        budget_episodes=budget.episodes,
        episodes_spent=spent, submissions=tuple(points), candidates=tuple(candidate_results(run)),
        best_so_far_auc=area if scored else None, best_so_far_mean=(area / counted) if scored and counted else None,
        gain_per_submission=gain_per, initial_assessment_score=finite_number(assessment.initial_program_score),
        assessment_score=finite_number(assessment.score), selected=_selected(run), terminal_reason=run.manifest.terminal_reason,
    )


def candidate_results(run: RunRecords) -> list[CandidateResult]:
    """Every Validation candidate with its train and Validation score, and the Assessment score of the selected one."""
    validation = run.validation or ValidationReport()
    selected = _selected(run)
    scores = {str(r.submission_id): finite_number(r.score) for r in validation.results or []}
    if not scores:
        recorded = run.manifest.validation.scores if run.manifest.validation is not None else None
        scores = {k: finite_number(v) for k, v in (recorded or {}).items()}
    assessment = finite_number(run.manifest.assessment_score)
    results = []
    for submission_id in (validation.candidates if validation.candidates is not None else list(scores)):
        record = run.submission(submission_id)
        results.append(CandidateResult(
            submission_id=submission_id, train_score=record.score if record else None, validation_score=scores.get(submission_id),
            assessment_score=assessment if submission_id == selected else None, selected=submission_id == selected,
        ))
    return results


def program_change(before: Program, after: Program) -> ProgramChange:
    """Files added, removed and changed from before to after, and the added and removed lines of their unified diff
    (of their line counts, for files past reports.diffs' bound: linear time whatever their size)."""
    changes = program_changes(before, after)
    old = {f.path for f in before.files}
    new = {f.path for f in after.files}
    return ProgramChange(
        added=tuple(sorted(new - old)), removed=tuple(sorted(old - new)),
        changed=tuple(sorted(c.path for c in changes if c.before is not None and c.after is not None)),
        lines_added=sum(c.lines_added for c in changes), lines_removed=sum(c.lines_removed for c in changes),
        bytes_before=before.total_bytes, bytes_after=after.total_bytes, summarised=tuple(c.path for c in changes if c.summarised),
    )


def _point(record: SubmissionRecord, spent: int, reused: int, best: float | None, gain: float | None,
           change: ProgramChange | None) -> SubmissionPoint:
    codes = record.failure_codes
    return SubmissionPoint(
        id=record.id, number=record.number, episodes=len(record.indices), episodes_spent=spent, reused_indices=reused,
        score=record.score, best_so_far=best, gain=gain, policy_failures=sum(codes.values()), failure_codes=codes,
        program_digest=record.program_digest, change=change, error=record.error,
    )


def _program(run: RunRecords, digest: str, fallback: str | None = None) -> Program | None:
    """The stored Program with digest, else the one in fallback (relative to the run directory); None when neither reads."""
    try:
        return run.program(digest)
    except ProgramError:
        pass
    if fallback is not None:
        try:
            return stored_program(run.root, fallback)
        except ProgramError:
            pass
    return None


def _selected(run: RunRecords) -> str | None:
    final = run.manifest.final
    return final.submission_id if final is not None and final.submission_id else None


def _finite(value: Any) -> Any:
    """value with every non-finite float (an overflowed sum of scores near 1e308) replaced by None: strict JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value
