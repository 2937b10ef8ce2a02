"""The run directory: where every record of a Run lives, and its append-only event log.

Layout (relative to the run directory):

    spec.yaml                  the spec as given
    run.json                   the manifest (phase, terminal reason, final selection, scores): records.models.RunManifest
    events.jsonl               append-only, fsynced event log (records.events.RunEvent): where the Run stands
    initial_program/           the starting Program
    programs/<digest>/         content-addressed Program store
    submissions/<id>/          record.json, feedback.json, artifacts/ per Submission
    workspace/                 the agent's workspace (program/, analysis/, feedback/, TASK.md)
    task.md                    the Host's copy of the TASK.md it gave the agent (the agent may change its own)
    host/                      the Host API socket (mounted into the agent container)
    agent/                     the agent's stdout/stderr and invocation
    validation.json, assessment.json
    private/                   Host-private: pool EpisodeSpecs, seeds. Never mounted anywhere.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from orchestrator.kernel.program import Program
from orchestrator.records import safe_read, schema
from orchestrator.records.atomic import PRIVATE_DIRECTORY, PUBLIC_DIRECTORY, make_directory, write_json
from orchestrator.records.events import RUN_EVENT, EventType, RunEvent, parse_log, phase_of, terminal_reason_of
from orchestrator.records.models import RunManifest, parse


class RunDirectory:
    """Paths of one run directory, and its event log. The lock serialises appends."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._lock = threading.Lock()

    # paths -------------------------------------------------------------------
    @property
    def events_path(self) -> Path:
        return self.root / "events.jsonl"

    @property
    def manifest_path(self) -> Path:
        return self.root / "run.json"

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"

    @property
    def task(self) -> Path:
        """The instructions the Host gave the agent, as it gave them: out of the agent's reach, unlike workspace/TASK.md."""
        return self.root / "task.md"

    @property
    def host(self) -> Path:
        return self.root / "host"

    @property
    def agent(self) -> Path:
        return self.root / "agent"

    @property
    def private(self) -> Path:
        return self.root / "private"

    def submission(self, submission_id: str) -> Path:
        return self.root / "submissions" / submission_id

    def published_feedback(self, submission_id: str) -> Path:
        return self.workspace / "feedback" / submission_id

    # creation ----------------------------------------------------------------
    def create(self, spec_text: str) -> None:
        """Make the layout for a new Run. Raises FileExistsError when root holds a Run already."""
        if self.events_path.exists():
            raise FileExistsError(f"{self.root} already holds a Run; use --resume to continue it")
        for directory in (self.root, self.workspace / "program", self.workspace / "analysis", self.workspace / "feedback",
                          self.host, self.agent, self.private, self.root / "programs", self.root / "submissions"):
            make_directory(directory, PUBLIC_DIRECTORY)  # whatever the umask: the agent's uid reads host/ and feedback/
        make_directory(self.private, PRIVATE_DIRECTORY)
        (self.root / "spec.yaml").write_text(spec_text)

    def store_program(self, program: Program) -> Path:
        """Write program to the content-addressed store (once); return its directory."""
        target = self.root / "programs" / program.digest.replace("sha256:", "")
        if not target.exists():
            staging = target.with_name(target.name + f".tmp{os.getpid()}")
            program.write_to(staging)
            os.replace(staging, target)
        return target

    # events ------------------------------------------------------------------
    def append(self, event: RunEvent) -> RunEvent:
        """Append event durably (write, flush, fsync), stamped with its schema and the time; return it as logged."""
        logged = RUN_EVENT.validate_python({**event.to_json(), "schema": schema.EVENT, "time": round(time.time(), 3)})
        line = (json.dumps(logged.to_json(), sort_keys=True) + "\n").encode()
        with self._lock:
            fd = os.open(self.events_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            try:
                os.write(fd, line)
                os.fsync(fd)
            finally:
                os.close(fd)
        return logged

    def append_event(self, kind: EventType | str, **fields: Any) -> RunEvent:
        """Append the event of type kind with fields, as append does. Raises ValueError (a pydantic ValidationError)
        when kind is not an EventType or a field is not one of its event's (nothing is written then)."""
        return self.append(RUN_EVENT.validate_python({"type": kind, **fields}))

    def events(self) -> list[RunEvent]:
        """The logged events in order, each as its typed event; a torn last line (a crash mid-append) is skipped.

        Read as `records.safe_read` reads (no link followed, at most MAX_EVENTS_BYTES). Raises schema.RecordError when
        events.jsonl is there but cannot be read so, and its subclass events.EventLogError (naming the line) when a line
        other than a torn last one is not an event.
        """
        try:
            data = safe_read.read_bytes(self.root, "events.jsonl", safe_read.MAX_EVENTS_BYTES)
        except schema.RecordError as exc:
            if exc.reason == "missing":
                return []
            raise
        return parse_log(self.events_path, data, RUN_EVENT)

    # manifest ----------------------------------------------------------------
    def read_stored_manifest(self) -> RunManifest | None:
        """run.json as stored (its phase and terminal reason may lag the event log), or None before it is first written.
        Raises schema.RecordError when it is unreadable or corrupt, a link, not a regular file, larger than
        safe_read.MAX_RECORD_BYTES, or not a run manifest (naming the first field that is not as the model says)."""
        try:
            document = safe_read.read_record(self.root, "run.json", schema.RUN)
        except schema.RecordError as exc:
            if exc.reason == "missing":
                return None
            raise
        return parse(RunManifest, self.manifest_path, document)

    def read_manifest(self) -> RunManifest:
        """run.json reconciled with the event log, what a reader shows of where the Run stands; an empty manifest before
        run.json is first written. Raises schema.RecordError as read_stored_manifest does.

        The event of a phase's end is written before run.json's phase, so the log is never behind: the phase is the later
        of the two (a manifest written without a log, or a log of before this rule, keeps its own), and a terminal
        reason the manifest lacks is the log's. A log that cannot be read leaves the manifest as stored (its readers say
        why). A resume starts from the stored phase instead (`run.driver.RunDriver` catches it up first).
        """
        stored = self.read_stored_manifest() or RunManifest()
        try:
            events = self.events()
        except schema.RecordError:
            return stored
        return reconcile(stored, events)

    def update_manifest(self, **fields: Any) -> RunManifest:
        """Set fields of run.json (as stored) atomically; return it. Raises schema.RecordError when run.json cannot be
        read, ValueError when a field is not as RunManifest says."""
        with self._lock:
            manifest = (self.read_stored_manifest() or RunManifest()).updated(**fields)
            write_json(self.manifest_path, {**manifest.to_json(), "schema": schema.RUN})
        return manifest


def reconcile(stored: RunManifest, events: list[RunEvent]) -> RunManifest:
    """stored with the phase and terminal reason the event log records where the log is ahead (see read_manifest)."""
    if not events:
        return stored
    logged = phase_of(events)
    changes: dict[str, Any] = {}
    if stored.phase is None or logged.order > stored.phase.order:
        changes["phase"] = logged
    reason = terminal_reason_of(events)
    if stored.terminal_reason is None and reason is not None:
        changes["terminal_reason"] = reason
    return stored.updated(**changes) if changes else stored
