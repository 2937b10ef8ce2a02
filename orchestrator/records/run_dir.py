"""The run directory: where every record of a Run lives, and its append-only event log.

Layout (relative to the run directory):

    spec.yaml                  the spec as given
    run.json                   the manifest (phase, terminal reason, final selection, scores)
    events.jsonl               append-only, fsynced event log
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
from typing import Any, Iterator

from orchestrator.kernel.program import Program
from orchestrator.records import safe_read, schema
from orchestrator.records.atomic import PRIVATE_DIRECTORY, PUBLIC_DIRECTORY, make_directory, write_json


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
    def append_event(self, kind: str, **fields: Any) -> dict[str, Any]:
        """Append one event durably (write, flush, fsync) and return it."""
        event = {"schema": schema.EVENT, "type": kind, "time": round(time.time(), 3), **fields}
        line = (json.dumps(event, sort_keys=True) + "\n").encode()
        with self._lock:
            fd = os.open(self.events_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            try:
                os.write(fd, line)
                os.fsync(fd)
            finally:
                os.close(fd)
        return event

    def events(self) -> Iterator[dict[str, Any]]:
        """Yield the logged events (JSON objects) in order; a torn last line (a crash mid-append) is skipped.

        Read as `records.safe_read` reads (no link followed, at most MAX_EVENTS_BYTES). Raises schema.RecordError when
        events.jsonl is there but cannot be read so.
        """
        try:
            lines = safe_read.json_lines(self.root, "events.jsonl")
        except schema.RecordError as exc:
            if exc.reason == "missing":
                return
            raise
        for line in lines:
            try:
                event = json.loads(line)
            except (json.JSONDecodeError, RecursionError):
                continue
            if isinstance(event, dict):
                yield event

    # manifest ----------------------------------------------------------------
    def read_manifest(self) -> dict[str, Any]:
        """run.json, or {} before it is first written. Raises schema.RecordError when it is unreadable or corrupt, a link,
        not a regular file or larger than safe_read.MAX_RECORD_BYTES."""
        try:
            return safe_read.read_record(self.root, "run.json", schema.RUN)
        except schema.RecordError as exc:
            if exc.reason == "missing":
                return {}
            raise

    def update_manifest(self, **fields: Any) -> dict[str, Any]:
        with self._lock:
            manifest = self.read_manifest()
            manifest.update(fields)
            write_json(self.manifest_path, {"schema": schema.RUN, **manifest})
        return manifest
