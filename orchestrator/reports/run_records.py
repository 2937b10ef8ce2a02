"""One run directory read back for reports, exports and replays: what the Run recorded, tolerant of partial records.

Reads through `records.run_dir.RunDirectory` and `records.safe_read` (no link below the run directory followed, no
FIFO opened, every read bounded, digests checked before they name a directory); a Submission whose record.json is
unreadable, partial or a link is kept as a row with its error rather than ending the reader.
Nothing here reads `private/`: callers that need the hidden plans (replay) plan them again with the Host's key.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from orchestrator.kernel.program import Program, ProgramError, ProgramErrorCode, capture_program_at
from orchestrator.records import models, safe_read, schema
from orchestrator.records.events import RunEvent
from orchestrator.records.run_dir import RunDirectory
from orchestrator.records.schema import finite_number

MAX_TASK_BYTES = 1024 * 1024
MAX_SUBMISSION_RECORDS_BYTES = 1 << 30  # every submissions/*/record.json of one Run together
_PUBLIC_SPEC = re.compile(r"^## Public spec\s*\n+```json\n(.*?)\n```", re.S | re.M)
_RELAY_FILE = re.compile(r"^exchanges\.(\d+)\.jsonl$")
Report = TypeVar("Report", models.ValidationReport, models.AssessmentReport)


@dataclass(frozen=True, slots=True, kw_only=True)
class SubmissionRecord:
    """One Submission as recorded in submissions/<id>/record.json; error is set (and the rest may be empty) when unreadable."""

    id: str
    number: int = 0
    selector: str = ""
    indices: tuple[int, ...] = ()
    program_digest: str = ""
    feedback: dict[str, Any] = field(default_factory=dict)
    # The artifacts kept with it (record.json's `artifacts`: name, media_type, retention, bytes, evicted); None in a
    # record written before they were listed.
    artifacts: list[dict[str, Any]] | None = None
    error: str | None = None

    @property
    def order(self) -> tuple[int, str]:
        """Its place in the Run: its number, else (an unreadable record) the number in its id."""
        digits = "".join(c for c in self.id if c.isdigit())
        return (self.number or (int(digits) if digits else 0), self.id)

    @property
    def score(self) -> float | None:
        """Its score; None when the record holds none, or no finite number (a record is not trusted to hold one)."""
        return finite_number(self.feedback.get("score"))

    @property
    def episodes(self) -> list[dict[str, Any]]:
        episodes = self.feedback.get("episodes")
        return [e for e in episodes if isinstance(e, dict)] if isinstance(episodes, list) else []

    @property
    def failure_codes(self) -> dict[str, int]:
        """How many of its Episodes ended in each policy failure code."""
        counts: dict[str, int] = {}
        for episode in self.episodes:
            code = episode.get("failure")
            if code:
                counts[str(code)] = counts.get(str(code), 0) + 1
        return counts


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRecords:
    """What a Run recorded, as read back (see load_run)."""

    root: Path
    manifest: models.RunManifest
    events: tuple[RunEvent, ...]
    submissions: tuple[SubmissionRecord, ...]
    task: str
    public_spec: dict[str, Any]
    validation: models.ValidationReport | None
    assessment: models.AssessmentReport | None
    problems: tuple[str, ...] = ()

    @property
    def benchmark(self) -> str:
        return str(self.manifest.benchmark or self.public_spec.get("id") or "")

    @property
    def direction(self) -> str:
        """"maximize" or "minimize": the Benchmark's primary metric direction as run.json records it (from the
        environment's own description), else as the Host told the agent (its TASK.md)."""
        recorded = self.manifest.metric.direction if self.manifest.metric is not None else None
        return "minimize" if (recorded or self.public_spec.get("direction")) == "minimize" else "maximize"

    @property
    def primary_metric(self) -> str:
        return str(self.public_spec.get("primary_metric") or "score")

    def submission(self, submission_id: str) -> SubmissionRecord | None:
        return next((s for s in self.submissions if s.id == submission_id), None)

    def program(self, digest: str) -> Program:
        """The stored Program with digest (programs/<hex>), read without following a link. Raises ProgramError (also for
        a digest that is not one: it never becomes a path)."""
        if not safe_read.is_digest(digest):
            raise ProgramError(ProgramErrorCode.INVALID_NAME, f"{str(digest)[:80]!r} is not a Program digest")
        return stored_program(self.root, safe_read.digest_path(digest))

    def published_feedback(self, submission_id: str) -> str:
        """Where the Submission's published Feedback lies, relative to the run directory."""
        return f"workspace/feedback/{submission_id}/feedback.json"


def load_run(root: Path) -> RunRecords:
    """Read the run directory root. Raises schema.RecordError when run.json is missing or unreadable.

    Other records that are missing or unreadable are left out and listed in problems. Every file is read as
    `records.safe_read` reads: no link below root is followed, no FIFO is opened, every read is bounded.
    """
    directory = RunDirectory(root)
    if directory.read_stored_manifest() is None:
        raise schema.RecordError(directory.manifest_path, "missing (not a run directory)")
    manifest = directory.read_manifest()
    problems: list[str] = []
    task, task_path, task_problem = _task_of(root)
    if not task:
        problems.append(f"{task_path}: {task_problem}")
    try:
        events: tuple[RunEvent, ...] = tuple(directory.events())
    except schema.RecordError as exc:
        events = ()
        problems.append(str(exc))
    try:
        names = [n for n in safe_read.names(root, "submissions") if not n.startswith(".")]
    except schema.RecordError as exc:
        names = []
        problems.append(str(exc))
    budget = [MAX_SUBMISSION_RECORDS_BYTES]
    submissions = [record for name in names if (record := _read_submission(root, name, budget)) is not None]
    return RunRecords(
        root=root,
        manifest=manifest,
        events=events,
        submissions=tuple(sorted(submissions, key=lambda s: s.order)),
        task=task,
        public_spec=public_spec_of(task),
        validation=_optional_record(root, "validation.json", models.ValidationReport, problems, manifest, "validation"),
        assessment=_optional_record(root, "assessment.json", models.AssessmentReport, problems, manifest, "assessment"),
        problems=tuple(problems),
    )


def stored_program(root: Path, relative: str) -> Program:
    """The Program in root/relative (a directory of the run directory root), reached without following a link below
    root and captured as `kernel.program.capture_program_at` does. Raises ProgramError."""
    try:
        with safe_read.directory(root, relative) as fd:
            return capture_program_at(fd)
    except schema.RecordError as exc:
        code = {"missing": ProgramErrorCode.NOT_FOUND, "a symbolic link (not followed)": ProgramErrorCode.SYMLINK}.get(
            exc.reason, ProgramErrorCode.NOT_A_DIRECTORY)
        raise ProgramError(code, str(exc)) from None


def _task_of(root: Path) -> tuple[str, Path, str]:
    """The instructions the Host gave the agent: its own copy (task.md), else, for a run directory older than that
    copy, the workspace's TASK.md, which the agent could change; each read as a regular file of at most
    MAX_TASK_BYTES, never through a link. Returns the text ("" when neither is readable), the file and why not."""
    reason = "missing"
    for relative in ("task.md", "workspace/TASK.md"):
        try:
            return safe_read.read_text(root, relative, MAX_TASK_BYTES), root / relative, ""
        except schema.RecordError as exc:
            if relative == "task.md" and exc.reason == "missing":
                continue
            return "", exc.path, exc.reason
    return "", root / "workspace" / "TASK.md", reason


def public_spec_of(task: str) -> dict[str, Any]:
    """The Benchmark's public spec as TASK.md shows it (its "## Public spec" JSON block), or {} when absent."""
    match = _PUBLIC_SPEC.search(task)
    if match is None:
        return {}
    try:
        document = json.loads(match.group(1))
    except json.JSONDecodeError:
        return {}
    return document if isinstance(document, dict) else {}


def relay_files(root: Path) -> list[tuple[int, str]]:
    """The relay's exchange records (relay/exchanges.N.jsonl, relative to root), by agent attempt N. Raises
    schema.RecordError when relay/ is a link or not a directory."""
    found = [(int(m.group(1)), f"relay/{name}") for name in safe_read.names(root, "relay") if (m := _RELAY_FILE.match(name))]
    return sorted(found)


def _read_submission(root: Path, name: str, budget: list[int]) -> SubmissionRecord | None:
    """submissions/<name>/record.json; None when that directory holds no record (yet). budget[0] is what the Run's
    Submission records may still read in all; the record's bytes are taken from it."""
    relative = f"submissions/{name}/record.json"
    try:
        if budget[0] <= 0:
            raise schema.RecordError(root / relative, f"not read: the Submission records before it hold {MAX_SUBMISSION_RECORDS_BYTES} bytes")
        data = safe_read.read_bytes(root, relative, min(safe_read.MAX_RECORD_BYTES, budget[0]))
        budget[0] -= len(data)
        record = models.parse(models.SubmissionRecord, root / relative, schema.parse_record(root / relative, data, schema.SUBMISSION))
        if record.indices is None:
            raise KeyError("indices")
        digest = record.program_digest or ""
        if (record.id or name) != name:
            raise ValueError(f"id {str(record.id)[:80]!r} in the directory of {name}")
        if not safe_read.is_digest(digest):
            raise ValueError(f"program_digest {str(digest)[:80]!r} is not a Program digest")
        return SubmissionRecord(
            id=name, number=record.number or 0, selector=record.selector or "",
            indices=tuple(record.indices), program_digest=digest, feedback=record.feedback.to_json(),
            artifacts=[a.to_json() for a in record.artifacts] if record.artifacts is not None else None,
        )
    except schema.RecordError as exc:
        if exc.reason == "missing" and safe_read.kind(root, f"submissions/{name}") == "dir":
            return None
        return SubmissionRecord(id=name, error=exc.reason)
    except KeyError as exc:
        return SubmissionRecord(id=name, error=f"partial record: no {exc.args[0]!r}")
    except (TypeError, ValueError, OverflowError) as exc:
        return SubmissionRecord(id=name, error=f"malformed record: {exc}")


def _optional_record(root: Path, name: str, model: type[Report], problems: list[str], manifest: models.RunManifest,
                     field_name: str) -> Report | None:
    """The record root/name as model; None, and a note in problems, when it cannot be read so; None without a note when
    the Run never reached it."""
    schema_id = model.model_fields["schema_id"].default
    try:
        return models.parse(model, root / name, safe_read.read_record(root, name, schema_id))
    except schema.RecordError as exc:
        if exc.reason != "missing":
            problems.append(str(exc))
        elif manifest.phase == "done" and getattr(manifest, field_name) is not None:
            problems.append(f"{exc.path}: missing")
        return None
