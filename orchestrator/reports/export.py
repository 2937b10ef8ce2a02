"""`runs export`: a Run as JSON Lines, one record per step of the agent's evolution (schema: export.schema.json).

Records, in order: the task the agent was given; then, by time, each model exchange the relay recorded
and each Submission (its Program as files or as a diff against the Program before it, selector, receipt
and public Feedback); last the outcome (Validation and Assessment). Only what the agent saw, or what the
Run's outcome publishes, is exported: never `private/` (pool EpisodeSpecs, seeds), the seed key or its
file, nor a Host path.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path
from typing import Any

from orchestrator.kernel.program import Program, ProgramError
from orchestrator.records import safe_read
from orchestrator.records.events import SubmissionAdmitted, SubmissionCompleted, SubmissionVoided
from orchestrator.records.models import BudgetRecord
from orchestrator.reports.diffs import program_changes
from orchestrator.reports.run_records import RunRecords, SubmissionRecord, load_run, relay_files, stored_program

EXPORT_SCHEMA = "epg.export/1"
SCHEMA_FILE = Path(__file__).with_name("export.schema.json")
_MAX_DEPTH = 4


class ProgramForm(StrEnum):
    FILES = "files"  # every file of the Program
    DIFF = "diff"  # a unified diff against the Program before it (the first Submission's against the starting Program)


def find_runs(root: Path) -> list[Path]:
    """root itself when it is a run directory (it holds run.json), else every run directory below it, sorted.

    Run directories are not searched inside, and the walk stops four levels down (a suite's layout); no link is
    followed. A run.json that is a link or not a regular file still marks a run directory, whose reading then says why.
    """
    if safe_read.kind(root, "run.json") is not None:
        return [root]
    found: list[Path] = []

    def walk(directory: Path, depth: int) -> None:
        for child in sorted(p for p in directory.iterdir() if p.is_dir() and not p.is_symlink()):
            if safe_read.kind(child, "run.json") is not None:
                found.append(child)
            elif depth < _MAX_DEPTH:
                walk(child, depth + 1)

    walk(root, 1)
    return found


def export_records(run_dir: Path, *, name: str, program_form: ProgramForm = ProgramForm.FILES) -> Iterator[dict[str, Any]]:
    """Yield the export records of the Run in run_dir; name is the value of their "run" field.

    Raises records.schema.RecordError when run.json cannot be read.
    """
    run = load_run(run_dir)
    steps: list[tuple[float, int, dict[str, Any]]] = []
    for order, record in enumerate(_submission_records(run, program_form)):
        steps.append((record.pop("_time"), order, record))
    for order, record in enumerate(_exchange_records(run), start=len(steps)):
        steps.append((record["time"], order, record))
    body = [record for _, _, record in sorted(steps, key=lambda step: (step[0], step[1]))]
    for step, record in enumerate([_task_record(run), *body, _outcome_record(run)]):
        yield {"schema": EXPORT_SCHEMA, "run": name, "step": step, **record}


# Characters a terminal or an editor may act on rather than show, written as \\uXXXX escapes (the same JSON value):
# DEL and the C1 controls (C0 ones json.dumps escapes itself), the line and paragraph separators, and the bidirectional
# formatting characters that can make text read otherwise than it is.
_ESCAPED = {code: f"\\u{code:04x}" for code in (*range(0x7F, 0xA0), 0x2028, 0x2029, 0x200E, 0x200F, *range(0x202A, 0x202F),
                                                 *range(0x2066, 0x206A))}


def json_line(record: dict[str, Any]) -> str:
    """One record as a line of JSON: UTF-8 text kept as it is, every control or formatting character escaped."""
    return json.dumps(record, ensure_ascii=False, sort_keys=False).translate(_ESCAPED) + "\n"


def write_jsonl(records: Iterator[dict[str, Any]], handle: Any) -> int:
    """Write records one JSON object a line (json_line) to a text handle; return how many."""
    count = 0
    for record in records:
        handle.write(json_line(record))
        count += 1
    return count


def export_schema() -> dict[str, Any]:
    """The JSON Schema of one export record."""
    schema: dict[str, Any] = json.loads(SCHEMA_FILE.read_text())
    return schema


# the records ---------------------------------------------------------------------
def _task_record(run: RunRecords) -> dict[str, Any]:
    manifest = run.manifest
    initial = _program(run, "initial_program")
    return {
        "kind": "task", "benchmark": run.benchmark, "agent": manifest.agent,
        "budget": manifest.budget.to_json() if manifest.budget is not None else None,
        "public_spec": run.public_spec, "instructions": run.task,
        "initial_program": _files_form(initial) if initial is not None else None,
    }


def _submission_records(run: RunRecords, form: ProgramForm) -> Iterator[dict[str, Any]]:
    admitted = {e.id: e for e in run.events if isinstance(e, SubmissionAdmitted)}
    receipts = _receipts(run)
    previous = _program(run, "initial_program")
    programs: dict[str, Program | None] = {}  # each stored Program read once, however many Submissions name it
    for record in (s for s in run.submissions if s.error is None):
        if record.program_digest not in programs:
            programs[record.program_digest] = _program(run, safe_read.digest_path(record.program_digest))
        program = programs[record.program_digest]
        if form is ProgramForm.DIFF and previous is not None and program is not None:
            shown = _diff_form(previous, program)
        elif program is not None:
            shown = _files_form(program)
        else:
            shown = {"digest": record.program_digest, "form": "missing"}
        if program is not None:
            previous = program
        event = admitted.get(record.id)
        when = event.time if event is not None else None
        yield {
            "_time": _time(when), "kind": "submission", "submission_id": record.id, "number": record.number,
            "time": when, "selector": record.selector, "indices": list(record.indices), "program": shown,
            "receipt": receipts.get(record.id) or _receipt(record, None), "feedback": record.feedback,
            **({"artifacts": record.artifacts} if record.artifacts is not None else {}),
        }


def _receipts(run: RunRecords) -> dict[str, dict[str, Any]]:
    """Each completed Submission's receipt, the budget as it left it, replayed from the event log."""
    budget = run.manifest.budget or BudgetRecord()
    episodes, submissions = budget.episodes, budget.max_submissions
    used = made = 0
    sizes: dict[str, int] = {}
    receipts: dict[str, dict[str, Any]] = {}
    for event in run.events:
        if isinstance(event, SubmissionAdmitted):
            sizes[event.id] = len(event.indices or [])
            used, made = used + sizes[event.id], made + 1
        elif isinstance(event, SubmissionVoided):
            used, made = used - sizes.get(event.id, 0), made - 1
        elif isinstance(event, SubmissionCompleted) and (record := run.submission(event.id)) is not None and record.error is None:
            left = {"episodes_used": used,
                    "episodes_left": episodes - used if episodes is not None else None,
                    "submissions_left": submissions - made if submissions is not None else None}
            receipts[record.id] = _receipt(record, left)
    return receipts


def _receipt(record: SubmissionRecord, budget: dict[str, Any] | None) -> dict[str, Any]:
    budget = budget or {"episodes_used": None, "episodes_left": None, "submissions_left": None}
    return {"submission_id": record.id, "program_digest": record.program_digest, "score": record.score,
            "policy_failures": sum(record.failure_codes.values()), "feedback_path": f"feedback/{record.id}/feedback.json", **budget}


def _exchange_records(run: RunRecords) -> Iterator[dict[str, Any]]:
    """Each exchange the relay recorded, read a line at a time (safe_read.stream_lines). Raises RecordError when a
    relay file is a link or not a regular file."""
    spent = [0]  # MAX_RELAY_BYTES bounds every relay file of the Run together
    for attempt, relative in relay_files(run.root):
        for line in safe_read.stream_lines(run.root, relative, max_bytes=safe_read.MAX_RELAY_BYTES - spent[0], spent=spent):
            try:
                entry = json.loads(line)
            except (json.JSONDecodeError, RecursionError):
                continue  # a torn last line
            if not isinstance(entry, dict):
                continue
            yield {
                "kind": "model_exchange", "attempt": attempt, "seq": entry.get("seq"), "time": _time(entry.get("time")),
                "method": entry.get("method"), "path": entry.get("path"), "status": entry.get("status"),
                "refused": entry.get("refused"), "error": entry.get("error"), "seconds": entry.get("seconds"), "tokens": entry.get("tokens"),
                "request": entry.get("request", ""), "response": entry.get("response", ""),
            }


def _outcome_record(run: RunRecords) -> dict[str, Any]:
    manifest = run.manifest
    validation = None
    if run.validation is not None:
        report = run.validation
        validation = {
            "rule": report.rule, "episodes": report.episodes, "candidates": list(report.candidates or []), "selected": report.selected,
            "results": [{"submission_id": r.submission_id, "program_digest": r.program_digest, "score": r.score,
                         "policy_failures": r.policy_failures} for r in report.results or []],
        }
    assessment = None
    summary = manifest.assessment
    if run.assessment is not None and summary is not None:
        assessment = {
            "submission_id": run.assessment.submission_id, "program_digest": run.assessment.program_digest,
            "score": summary.score, "episodes": summary.episodes, "policy_failures": summary.policy_failures,
            "initial_program_score": summary.initial_program_score,
        }
    final = manifest.final.to_json() if manifest.final is not None else None
    return {"kind": "outcome", "phase": manifest.phase, "terminal_reason": manifest.terminal_reason,
            "final": final, "validation": validation, "assessment": assessment}


def _time(value: Any) -> float:
    """A recorded Unix time as a finite float (0.0 for anything else: the records are not trusted to hold one)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0.0
    try:
        number = float(value)
    except OverflowError:
        return 0.0
    return number if math.isfinite(number) else 0.0


# Programs -------------------------------------------------------------------------
def _program(run: RunRecords, relative: str) -> Program | None:
    try:
        return stored_program(run.root, relative)
    except ProgramError:
        return None


def _files_form(program: Program) -> dict[str, Any]:
    return {"digest": program.digest, "form": "files", "files": [_file(f.path, f.data) for f in program.files]}


def _file(path: str, data: bytes) -> dict[str, Any]:
    try:
        return {"path": path, "text": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"path": path, "base64": base64.b64encode(data).decode("ascii")}


def _diff_form(before: Program, after: Program) -> dict[str, Any]:
    """after as a unified diff against before, within reports.diffs' bound: text files past it are listed in
    "summarised" with their line counts instead; files that are not UTF-8 text are given whole when they changed."""
    changes = program_changes(before, after)
    return {"digest": after.digest, "form": "diff", "base_digest": before.digest,
            "diff": "".join(line for change in changes for line in change.diff),
            "removed": sorted(c.path for c in changes if c.after is None),
            "binary_files": [_file(c.path, c.after) for c in changes if not c.text and c.after is not None],
            "summarised": [c.summary() for c in changes if c.summarised]}
