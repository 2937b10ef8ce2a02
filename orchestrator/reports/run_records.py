"""One run directory read back for reports, exports and replays: what the Run recorded, tolerant of partial records.

Reads through `records.run_dir.RunDirectory` and `records.schema.read_record`; a Submission whose
record.json is unreadable or partial is kept as a row with its error rather than ending the reader.
Nothing here reads `private/`: callers that need the hidden plans (replay) plan them again with the Host's key.
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.kernel.program import SAFE_DIR_FLAGS, SAFE_FILE_FLAGS
from orchestrator.records import schema
from orchestrator.records.run_dir import RunDirectory

MAX_TASK_BYTES = 1024 * 1024
_PUBLIC_SPEC = re.compile(r"^## Public spec\s*\n+```json\n(.*?)\n```", re.S | re.M)
_RELAY_FILE = re.compile(r"^exchanges\.(\d+)\.jsonl$")


@dataclass(frozen=True, slots=True, kw_only=True)
class SubmissionRecord:
    """One Submission as recorded in submissions/<id>/record.json; error is set (and the rest may be empty) when unreadable."""

    id: str
    number: int = 0
    selector: str = ""
    indices: tuple[int, ...] = ()
    program_digest: str = ""
    feedback: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    @property
    def order(self) -> tuple[int, str]:
        """Its place in the Run: its number, else (an unreadable record) the number in its id."""
        digits = "".join(c for c in self.id if c.isdigit())
        return (self.number or (int(digits) if digits else 0), self.id)

    @property
    def score(self) -> float | None:
        score = self.feedback.get("score")
        return float(score) if isinstance(score, (int, float)) and not isinstance(score, bool) else None

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
    manifest: dict[str, Any]
    events: tuple[dict[str, Any], ...]
    submissions: tuple[SubmissionRecord, ...]
    task: str
    public_spec: dict[str, Any]
    validation: dict[str, Any] | None
    assessment: dict[str, Any] | None
    problems: tuple[str, ...] = ()

    @property
    def benchmark(self) -> str:
        return str(self.manifest.get("benchmark") or self.public_spec.get("id") or "")

    @property
    def direction(self) -> str:
        """"maximize" or "minimize": the Benchmark's primary metric direction as run.json records it (from the
        environment's own description), else as the Host told the agent (its TASK.md)."""
        metric = self.manifest.get("metric")
        recorded = metric.get("direction") if isinstance(metric, dict) else None
        return "minimize" if (recorded or self.public_spec.get("direction")) == "minimize" else "maximize"

    @property
    def primary_metric(self) -> str:
        return str(self.public_spec.get("primary_metric") or "score")

    def submission(self, submission_id: str) -> SubmissionRecord | None:
        return next((s for s in self.submissions if s.id == submission_id), None)

    def program_dir(self, digest: str) -> Path:
        """The content-addressed store's directory of the Program with digest."""
        return self.root / "programs" / digest.removeprefix("sha256:")

    def published_feedback_path(self, submission_id: str) -> Path:
        return RunDirectory(self.root).published_feedback(submission_id) / "feedback.json"


def load_run(root: Path) -> RunRecords:
    """Read the run directory root. Raises schema.RecordError when run.json is missing or unreadable.

    Other records that are missing or unreadable are left out and listed in problems.
    """
    directory = RunDirectory(root)
    manifest = directory.read_manifest()
    if not manifest:
        raise schema.RecordError(directory.manifest_path, "missing (not a run directory)")
    problems: list[str] = []
    task, task_path = _task_of(directory)
    if not task:
        problems.append(f"{task_path}: missing")
    return RunRecords(
        root=root,
        manifest=manifest,
        events=tuple(directory.events()),
        submissions=tuple(sorted((_read_submission(p) for p in (root / "submissions").glob("*/record.json")), key=lambda s: s.order)),
        task=task,
        public_spec=public_spec_of(task),
        validation=_optional_record(root / "validation.json", schema.VALIDATION, problems, manifest, "validation"),
        assessment=_optional_record(root / "assessment.json", schema.ASSESSMENT, problems, manifest, "assessment"),
        problems=tuple(problems),
    )


def _task_of(directory: RunDirectory) -> tuple[str, Path]:
    """The instructions the Host gave the agent: its own copy (task.md), else, for a run directory older than that
    copy, the workspace's TASK.md, which the agent could change: read without following a link, as a regular file
    of at most MAX_TASK_BYTES, or not at all."""
    if directory.task.is_file():
        return directory.task.read_text(errors="replace"), directory.task
    fallback = directory.workspace / "TASK.md"
    try:
        parent = os.open(directory.workspace, SAFE_DIR_FLAGS)
    except OSError:
        return "", fallback
    try:
        fd = os.open("TASK.md", SAFE_FILE_FLAGS, dir_fd=parent)
    except OSError:
        return "", fallback
    finally:
        os.close(parent)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "", fallback
        data = os.read(fd, MAX_TASK_BYTES)
    finally:
        os.close(fd)
    return data.decode(errors="replace"), fallback


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


def relay_files(root: Path) -> list[tuple[int, Path]]:
    """The relay's exchange records (relay/exchanges.N.jsonl), by agent attempt N."""
    folder = root / "relay"
    found = [(int(m.group(1)), path) for path in folder.iterdir() if (m := _RELAY_FILE.match(path.name))] if folder.is_dir() else []
    return sorted(found)


def _read_submission(path: Path) -> SubmissionRecord:
    submission_id = path.parent.name
    try:
        record = schema.read_record(path, schema.SUBMISSION)
        feedback = record["feedback"]
        indices = record["indices"]
        if not isinstance(feedback, dict) or not isinstance(indices, list):
            raise TypeError("feedback must be an object and indices a list")
        return SubmissionRecord(
            id=str(record.get("id", submission_id)), number=int(record.get("number") or 0), selector=str(record.get("selector", "")),
            indices=tuple(int(i) for i in indices), program_digest=str(record.get("program_digest", "")), feedback=feedback,
        )
    except schema.RecordError as exc:
        return SubmissionRecord(id=submission_id, error=exc.reason)
    except KeyError as exc:
        return SubmissionRecord(id=submission_id, error=f"partial record: no {exc.args[0]!r}")
    except (TypeError, ValueError) as exc:
        return SubmissionRecord(id=submission_id, error=f"malformed record: {exc}")


def _optional_record(path: Path, kind: str, problems: list[str], manifest: dict[str, Any], field_name: str) -> dict[str, Any] | None:
    """The record at path; None without a note when the Run never reached it."""
    if not path.exists():
        if manifest.get("phase") == "done" and manifest.get(field_name) is not None:
            problems.append(f"{path}: missing")
        return None
    try:
        return schema.read_record(path, kind)
    except schema.RecordError as exc:
        problems.append(str(exc))
        return None
