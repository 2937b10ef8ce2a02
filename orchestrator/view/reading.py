"""What the view shows, read from a runs or suites directory: the index, a Run, a suite, a Feedback image, and the
cheap signatures that tell the page something changed.

Everything below the directory the user named is untrusted and may be written while it is read. A Run or suite is
addressed by its path relative to that directory (plain components, `records.safe_read.parts_of`); its directory is
opened from the root's descriptor without following a link (`records.safe_read.directory`) and read through that
open descriptor (`/proc/self/fd/N`), so nothing swapped in for a link after the check is followed. Every file is read
as `records.safe_read` reads (bounded, no FIFO, no link), every text is bounded and has its control characters made
visible, and the page receives JSON only: it never receives HTML built from the records.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.kernel.program import Program, ProgramError
from orchestrator.records import safe_read
from orchestrator.records.artifacts import MAX_ARTIFACT_BYTES, name_problem
from orchestrator.records.events import RunEvent, SubmissionAdmitted, SubmissionCompleted, SubmissionVoided
from orchestrator.records.models import RunManifest
from orchestrator.records.run_dir import RunDirectory
from orchestrator.records.schema import RecordError, finite_number
from orchestrator.reports.diagnostics import better, diagnose
from orchestrator.reports.diffs import program_changes
from orchestrator.reports.run_records import RunRecords, load_run, stored_program
from orchestrator.view.exchanges import exchanges
from orchestrator.view.shown import cleaned, visible

MAX_VALUES_TEXT = 20_000  # characters of a Submission's Feedback values as indented JSON
MAX_EPISODES = 200  # Episode rows of one Submission
MAX_DIFF_LINES = 400  # diff lines shown of one Submission's change
MAX_DIFF_LINE = 400  # characters of one diff line
MAX_ENTRIES = 5000  # Runs and suites listed in the index
RUN_FILES = ("run.json", "events.jsonl", "validation.json", "assessment.json")
SUITE_FILES = ("suite.json", "suite-events.jsonl")
# The images a page may show, by their first bytes: never SVG or HTML, whatever a name or a record says.
IMAGE_TYPES = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".webp")
_PLAIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
# Index rows by run directory (device, inode, path, and the root's name for the root itself), with the signature of the files they were read from.
_ROWS: dict[tuple[int, int, str, str], tuple[str, dict[str, Any]]] = {}
_ROWS_LOCK = threading.Lock()


class NotFound(Exception):
    """What was asked for is not there, or cannot be read as what it should be (the message says why, one line)."""


def _parts(relative: str) -> str:
    """relative ("." for the root itself) checked as a plain relative path. Raises NotFound."""
    if relative in ("", "."):
        return "."
    try:
        return "/".join(safe_read.parts_of(relative))
    except RecordError:
        raise NotFound(f"{visible(relative, 200)}: not a plain relative path") from None


@contextmanager
def opened(root: Path, relative: str) -> Iterator[Path]:
    """The directory root/relative, reached without following a link below root, as a path through its open descriptor
    (valid inside the block). Raises NotFound."""
    relative = _parts(relative)
    try:
        with safe_read.directory(root, "" if relative == "." else relative) as fd:
            yield Path(f"/proc/self/fd/{fd}")
    except RecordError as exc:
        raise NotFound(f"{visible(relative, 200)}: {exc.reason}") from None


def _shown_error(exc: Exception, inside: Path, relative: str) -> str:
    return visible(str(exc).replace(str(inside), relative))


# signatures: what changes when a Run or a suite moves on ----------------------------------------------------------------
def _stats(directory: int, names: tuple[str, ...] | list[str]) -> list[tuple[str, int, int]]:
    found = []
    for name in names:
        try:
            info = os.stat(name, dir_fd=directory, follow_symlinks=False)
        except OSError:
            continue
        found.append((name, info.st_size, info.st_mtime_ns))
    return found


def _listing(directory: int, limit: int = MAX_ENTRIES) -> list[str]:
    names: list[str] = []
    with os.scandir(directory) as entries:
        for entry in entries:
            if len(names) >= limit:
                break
            names.append(entry.name)
    return sorted(names)


def _child(directory: int, name: str) -> int | None:
    """The plain directory name below the descriptor directory, opened without following a link; None when it is not."""
    try:
        return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=directory)
    except OSError:
        return None


def _run_signature(directory: int) -> list[Any]:
    found: list[Any] = _stats(directory, RUN_FILES)
    relay = _child(directory, "relay")
    if relay is not None:
        try:
            found.append(_stats(relay, _listing(relay, 1000)))
        finally:
            os.close(relay)
    return found


def _suite_signature(directory: int) -> list[Any]:
    found: list[Any] = _stats(directory, SUITE_FILES)
    runs = _child(directory, "runs")
    if runs is not None:
        try:
            for name in _listing(runs):
                run = _child(runs, name)
                if run is not None:
                    try:
                        found.append((name, _stats(run, RUN_FILES)))
                    finally:
                        os.close(run)
        finally:
            os.close(runs)
    return found


def signature(root: Path, what: str, relative: str = ".") -> str:
    """A short text that changes when what ("index", "run" or "suite") at relative changes: sizes and modification times
    of the files that say where Runs stand, read with stat only. "" when it cannot be read."""
    try:
        with opened(root, relative) as inside:
            fd = os.open(inside, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                if what == "run":
                    parts: list[Any] = _run_signature(fd)
                elif what == "suite":
                    parts = _suite_signature(fd)
                else:
                    parts = [_stats(fd, RUN_FILES + SUITE_FILES)]
                    if _stats(fd, ("suite.json",)):  # DIR is a suite: its Runs are below runs/
                        parts.append(_suite_signature(fd))
                    for name in _listing(fd):
                        child = _child(fd, name)
                        if child is None:
                            continue
                        try:
                            parts.append((name, _stats(child, RUN_FILES + SUITE_FILES)))
                            if _stats(child, ("suite.json",)):
                                parts.append(_suite_signature(child))
                        finally:
                            os.close(child)
            finally:
                os.close(fd)
    except (NotFound, OSError):
        return ""
    return json.dumps(parts)


# the index ----------------------------------------------------------------------------------------------------------
def index(root: Path) -> dict[str, Any]:
    """Every Run and suite in root (root itself when it is one; a suite's Runs under it): one row each."""
    rows: list[dict[str, Any]] = []
    problems: list[str] = []
    try:
        with opened(root, ".") as inside:
            top = _kind_of(inside, ".")
            if top == "run":
                rows.append(run_row(root, "."))  # root itself: named by its own name
            elif top == "suite":
                rows += _suite_rows(inside, ".", "")
            else:
                for name in safe_read.names(inside, "", MAX_ENTRIES)[:MAX_ENTRIES]:
                    if name.startswith(".") or safe_read.kind(inside, name) != "dir":
                        continue
                    found = _kind_of(inside, name)
                    if found == "run":
                        rows.append(run_row(inside, name))
                    elif found == "suite":
                        rows += _suite_rows(inside, name, name + "/")
    except (NotFound, RecordError) as exc:
        problems.append(visible(str(exc)))
    return {"root": visible(str(root)), "rows": rows, "problems": problems}


def _kind_of(root: Path, relative: str) -> str | None:
    prefix = "" if relative == "." else relative + "/"
    if safe_read.kind(root, prefix + "suite.json") == "file":
        return "suite"
    if any(safe_read.kind(root, prefix + name) == "file" for name in ("run.json", "events.jsonl")):
        return "run"
    return None


def _suite_rows(root: Path, relative: str, prefix: str) -> list[dict[str, Any]]:
    from orchestrator.suite.directory import SuiteDirectory  # suite plans read with pydantic and yaml: only for suites

    try:
        with opened(root, relative) as inside:
            manifest = SuiteDirectory(inside).read_manifest()
            runs = []
            for planned in manifest.runs:
                if safe_read.kind(inside, planned.run_dir) == "dir":
                    row = run_row(inside, planned.run_dir)
                else:
                    row = _empty_row(planned.run_dir, "pending")
                runs.append({**row, "path": prefix + planned.run_dir, "suite": prefix.rstrip("/") or "."})
    except (NotFound, RecordError) as exc:
        return [{**_empty_row(relative, "unreadable"), "kind": "suite", "problem": _shown_error(exc, root, relative)}]
    done = sum(1 for run in runs if run["phase"] == "done")
    starts = [run["started"] for run in runs if run.get("started") is not None]
    ends = [run["started"] + run["seconds"] for run in runs if run.get("started") is not None and run["seconds"] is not None]
    finished = bool(runs) and done == len(runs)
    suite = {**_empty_row(relative, "finished" if finished else "running"), "kind": "suite",
             "name": visible(manifest.name or relative, 200), "runs": len(runs), "done": done, "started": min(starts, default=None),
             "seconds": max(ends) - min(starts) if finished and starts and ends else None}
    return [suite, *runs]


def _empty_row(relative: str, status: str) -> dict[str, Any]:
    return {"kind": "run", "path": relative, "name": visible(relative, 200), "benchmark": "", "agent": "", "phase": "",
            "status": status, "budget_episodes": None, "episodes_spent": 0, "episodes_left": None, "submissions": 0,
            "best_score": None, "assessment_score": None, "started_at": "", "seconds": None, "terminal_reason": "", "problem": ""}


def run_row(root: Path, relative: str) -> dict[str, Any]:
    """The index row of the Run at root/relative: Benchmark, agent, phase, budget left, best and Assessment score, start,
    duration, status ("running", "finished" or "unreadable"). A Run whose run.json and events.jsonl have not changed
    since its row was last read (same size and modification time) is not read again."""
    try:
        with opened(root, relative) as inside:
            fd = os.open(inside, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                info = os.fstat(fd)
                key = (info.st_dev, info.st_ino, relative, root.name if relative == "." else "")
                sign = json.dumps(_stats(fd, RUN_FILES[:2]))
            finally:
                os.close(fd)
            with _ROWS_LOCK:
                kept = _ROWS.get(key)
            if kept is not None and kept[0] == sign:
                return kept[1]
            directory = RunDirectory(inside)
            manifest = directory.read_manifest()
            events = directory.events()
    except (NotFound, RecordError, OSError) as exc:
        return {**_empty_row(relative, "unreadable"), "problem": _shown_error(exc, root, relative)}
    row = _row(root, relative, manifest, events)
    with _ROWS_LOCK:
        if len(_ROWS) > 4 * MAX_ENTRIES:
            _ROWS.clear()
        _ROWS[key] = (sign, row)
    return row


def _row(root: Path, relative: str, manifest: RunManifest, events: list[RunEvent]) -> dict[str, Any]:
    direction = "minimize" if manifest.metric is not None and manifest.metric.direction == "minimize" else "maximize"
    spent, best, submissions = _progress(events, direction)
    budget = manifest.budget.episodes if manifest.budget is not None else None
    first = next((e.time for e in events if e.time is not None), None)
    last = next((e.time for e in reversed(events) if e.time is not None), None)
    phase = manifest.current_phase.value
    done = phase == "done"
    seconds = manifest.wall_seconds if done and manifest.wall_seconds is not None else (
        (last - first) if done and first is not None and last is not None else None)
    return {**_empty_row(relative, "finished" if done else "running"),
            "name": visible(Path(relative).name if relative != "." else root.name, 200),
            "benchmark": visible(manifest.benchmark or "", 200), "agent": visible(manifest.agent or "", 200), "phase": phase,
            "budget_episodes": budget, "episodes_spent": spent, "episodes_left": None if budget is None else max(0, budget - spent),
            "submissions": submissions, "best_score": best, "assessment_score": finite_number(manifest.assessment_score),
            "started_at": visible(manifest.started_at or "", 64), "started": first, "seconds": finite_number(seconds),
            "terminal_reason": visible(str(manifest.terminal_reason or ""), 200),
            "max_submissions": manifest.budget.max_submissions if manifest.budget is not None else None}


def _progress(events: list[Any], direction: str) -> tuple[int, float | None, int]:
    """Episodes spent, the best score and the Submissions completed, from a Run's event log."""
    admitted: dict[str, int] = {}
    best: float | None = None
    completed = 0
    for event in events:
        if isinstance(event, SubmissionAdmitted):
            admitted[event.id] = len(event.indices or [])
        elif isinstance(event, SubmissionVoided):
            admitted.pop(event.id, None)
        elif isinstance(event, SubmissionCompleted):
            completed += 1
            score = finite_number(event.score)
            if score is not None and (best is None or better(score, best, direction)):
                best = score
    return sum(admitted.values()), best, completed


# a Run --------------------------------------------------------------------------------------------------------------
@dataclass
class _Programs:
    """Each stored Program of a Run read once per page."""

    run: RunRecords
    found: dict[str, Program | None]

    def get(self, digest: str) -> Program | None:
        if digest not in self.found:
            try:
                self.found[digest] = self.run.program(digest)
            except ProgramError:
                self.found[digest] = None
        return self.found[digest]


def run_page(root: Path, relative: str) -> dict[str, Any]:
    """Everything the Run page shows of the Run at root/relative. Raises NotFound (no such Run, run.json unreadable)."""
    row = run_row(root, relative)
    with opened(root, relative) as inside:
        try:
            run = load_run(inside)
        except RecordError as exc:
            raise NotFound(_shown_error(exc, inside, relative)) from None
        diagnostics = diagnose(run)
        programs = _Programs(run=run, found={})
        try:
            previous: Program | None = stored_program(inside, "initial_program")
        except ProgramError:
            previous = programs.get(run.manifest.initial_program_digest or "")
        submissions = []
        points = {p.id: p for p in diagnostics.submissions}
        for record in run.submissions:
            program = programs.get(record.program_digest) if record.program_digest else None
            point = points.get(record.id)
            submissions.append(_submission(record, point, previous, program))
            if program is not None:
                previous = program
        page = {
            "row": row, "problems": [_shown_error(Exception(p), inside, relative) for p in run.problems],
            "direction": diagnostics.direction, "primary_metric": visible(diagnostics.primary_metric, 200),
            "budget": cleaned(run.manifest.budget.to_json() if run.manifest.budget is not None else {}),
            "curve": [{"id": p.id, "spent": p.episodes_spent, "score": finite_number(p.score), "best": finite_number(p.best_so_far)}
                      for p in diagnostics.submissions],
            "best_so_far_auc": finite_number(diagnostics.best_so_far_auc), "gain_per_submission": finite_number(diagnostics.gain_per_submission),
            "submissions": submissions, "validation": _validation(run), "assessment": _assessment(run),
            "selected": visible(diagnostics.selected or "", 200), "events": _events(run),
            "exchanges": exchanges(inside),
        }
    return page


def _submission(record: Any, point: Any, previous: Program | None, program: Program | None) -> dict[str, Any]:
    feedback = record.feedback
    values = feedback.get("values")
    values_text = json.dumps(values, indent=1, sort_keys=True, default=str) if values else ""
    episodes = [_episode(e) for e in record.episodes[:MAX_EPISODES]]
    artifacts = record.artifacts if record.artifacts is not None else [{"name": n} for n in feedback.get("artifacts") or [] if isinstance(n, str)]
    return {
        "id": visible(record.id, 200), "number": record.number, "selector": visible(record.selector, 400), "episodes_count": len(record.indices),
        "score": record.score, "best": finite_number(point.best_so_far) if point is not None else None,
        "failure_codes": cleaned(record.failure_codes), "error": visible(record.error or ""),
        "program_digest": visible(record.program_digest, 80), "values": visible(values_text, MAX_VALUES_TEXT),
        "episodes": episodes, "episodes_left_out": max(0, len(record.episodes) - MAX_EPISODES),
        "artifacts": [_artifact(a) for a in artifacts[:200] if isinstance(a, dict)],
        "diff": _diff(previous, program) if previous is not None and program is not None else None,
    }


def _episode(episode: dict[str, Any]) -> dict[str, Any]:
    keys = ("index", "split", "status", "failure", "reason", "steps", "reward", "policy_seconds", "output_tail", "traceback")
    return {key: cleaned(episode.get(key)) for key in keys}


def _artifact(artifact: dict[str, Any]) -> dict[str, Any]:
    name = str(artifact.get("name", ""))
    image = (name_problem(name) is None and name.lower().endswith(IMAGE_SUFFIXES) and not artifact.get("evicted"))
    return {"name": name if image else visible(name, 400), "shown_name": visible(name, 400),
            "media_type": visible(str(artifact.get("media_type") or ""), 100), "bytes": cleaned(artifact.get("bytes")),
            "evicted": bool(artifact.get("evicted")), "image": image}


def _diff(before: Program, after: Program) -> dict[str, Any]:
    """The change from before to after as reports.diffs bounds it, and at most MAX_DIFF_LINES lines of it."""
    files = []
    left = MAX_DIFF_LINES
    for change in program_changes(before, after):
        lines = [visible(line.rstrip("\n"), MAX_DIFF_LINE) for line in change.diff[:max(0, left)]]
        left -= len(lines)
        files.append({"path": visible(change.path, 400), "added": change.before is None, "removed": change.after is None,
                      "text": change.text, "summarised": change.summarised, "lines_added": change.lines_added,
                      "lines_removed": change.lines_removed, "lines": lines, "lines_left_out": len(change.diff) - len(lines)})
    return {"files": files, "same": before.digest == after.digest}


def _validation(run: RunRecords) -> dict[str, Any] | None:
    if run.validation is None:
        return None
    report = run.validation
    return {"candidates": cleaned(report.candidates or []), "rule": visible(report.rule or "", 200), "selected": visible(report.selected or "", 200),
            "episodes": report.episodes,
            "results": [{"submission_id": visible(r.submission_id or "", 200), "score": finite_number(r.score), "policy_failures": r.policy_failures}
                        for r in report.results or []]}


def _assessment(run: RunRecords) -> dict[str, Any] | None:
    if run.assessment is None:
        return None
    report = run.assessment
    initial = report.initial_program
    return {"submission_id": visible(report.submission_id or "", 200), "score": finite_number(report.score),
            "initial_program_score": finite_number(initial.score) if initial is not None else None,
            "policy_failures": report.policy_failures,
            "episodes": [_episode(e.to_json()) for e in report.episodes[:MAX_EPISODES]]}


def _events(run: RunRecords) -> list[dict[str, Any]]:
    shown = []
    for event in run.events[-300:]:
        document = event.to_json()
        document.pop("schema", None)
        kind = str(document.pop("type", ""))
        time = document.pop("time", None)
        shown.append({"type": kind, "time": finite_number(time), "fields": visible(json.dumps(document, sort_keys=True, default=str), 600)})
    return shown


# a suite ------------------------------------------------------------------------------------------------------------
def suite_page(root: Path, relative: str) -> dict[str, Any]:
    """The suite at root/relative: its ranked table and aggregate rank scores, each cell's Runs by path. Raises NotFound."""
    from orchestrator.suite.report import build_report  # pydantic and yaml: only for suites

    prefix = "" if _parts(relative) == "." else _parts(relative) + "/"
    with opened(root, relative) as inside:
        try:
            report = build_report(inside)
        except RecordError as exc:
            raise NotFound(_shown_error(exc, inside, relative)) from None
        document = cleaned(report.to_json())
    document.pop("suite_dir", None)
    document["path"] = relative
    runs_of: dict[str, list[dict[str, Any]]] = {}
    for run in report.runs:
        runs_of.setdefault(f"{run.benchmark}\n{run.agent}", []).append(
            {"path": prefix + run.run_dir, "name": visible(run.name, 200), "phase": visible(run.phase, 40), "score": finite_number(run.score)})
    for cell in document["table"]:
        cell["runs"] = runs_of.get(f"{cell['benchmark']}\n{cell['agent']}", [])
    for row in document["runs"]:
        row["path"] = prefix + str(row["run_dir"])
    return dict(document)


# a Feedback image ---------------------------------------------------------------------------------------------------
def image_type(data: bytes) -> str | None:
    """The media type of an image the page may show (PNG, JPEG, GIF, WebP), from its first bytes; None for anything else."""
    for magic, media_type in IMAGE_TYPES:
        if data.startswith(magic):
            return media_type
    if len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def artifact_image(root: Path, relative: str, submission: str, name: str) -> tuple[bytes, str]:
    """The bytes and media type of the image artifact name of a Submission of the Run at root/relative, read without
    following a link and at most MAX_ARTIFACT_BYTES. Raises NotFound (a name that is not an artifact's, a file that is
    not a PNG, JPEG, GIF or WebP image by its own bytes)."""
    if not _PLAIN.match(submission) or name_problem(name) is not None or not name.lower().endswith(IMAGE_SUFFIXES):
        raise NotFound("not an image artifact")
    with opened(root, relative) as inside:
        try:
            data = safe_read.read_bytes(inside, f"submissions/{submission}/artifacts/{name}", MAX_ARTIFACT_BYTES)
        except RecordError as exc:
            raise NotFound(exc.reason) from None
    media_type = image_type(data)
    if media_type is None:
        raise NotFound("not a PNG, JPEG, GIF or WebP image")
    return data, media_type
