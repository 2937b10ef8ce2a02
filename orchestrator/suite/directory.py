"""The suite directory: the suite as given, its plan, one ordinary run directory per Run, logs and an event log.

Layout (relative to the suite directory):

    suite.yaml          the suite file as given
    suite.json          the plan (records.models.SuiteManifest): every Run, its Benchmark, family, agent, repeat, seed
    specs/NAME.yaml     the Run spec of each Run, what `epg-orchestrate run` reads
    runs/NAME/          the run directory `epg-orchestrate run specs/NAME.yaml -o runs/NAME` makes
    logs/NAME.log       the Run's progress (stderr of every invocation, appended); NAME.json its last --json output
    suite-events.jsonl  append-only, fsynced (records.events.SuiteEvent): each invocation of a Run and how it ended (not events.jsonl:
                        `runs list` takes a directory holding one for a run directory)
    lock                locked (flock) by the one process running the suite

A suite directory may come from someone else: suite.json's paths are checked (every Run's run_dir is
runs/NAME and its spec specs/NAME.yaml, NAME a plain name, no two alike), everything is read as
`records.safe_read` reads (no link below the suite directory followed, no FIFO opened, every read
bounded), and the logs and the lock are opened without following a link or writing through a second
name of a file elsewhere.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO

from orchestrator.records import safe_read
from orchestrator.records import schema as record_schema
from orchestrator.records.atomic import PUBLIC_DIRECTORY, PUBLIC_FILE, make_directory, write_bytes, write_json
from orchestrator.records.events import SUITE_EVENT_ADAPTER, Phase, SuiteEvent, SuiteEventType, parse_log
from orchestrator.records.models import PlannedRunRecord, SuiteManifest, parse
from orchestrator.records.provenance import utc_now
from orchestrator.records.run_dir import RunDirectory
from orchestrator.records.schema import SUITE, SUITE_EVENT
from orchestrator.suite.spec import PlannedRun, spec_yaml

_RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class SuiteBusy(Exception):
    """Another process holds the suite's lock: it is running the suite now."""


class SuiteDirectory:
    """Paths of one suite directory, its plan and its event log (appended by one process at a time)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @property
    def manifest_path(self) -> Path:
        return self.root / "suite.json"

    @property
    def events_path(self) -> Path:
        return self.root / "suite-events.jsonl"

    def run_dir(self, run: PlannedRunRecord | Mapping[str, Any]) -> Path:
        return self.root / planned(run).run_dir

    def spec_file(self, run: PlannedRunRecord | Mapping[str, Any]) -> Path:
        return self.root / planned(run).spec

    def log(self, name: str, suffix: str) -> Path:
        return self.root / "logs" / f"{name}{suffix}"

    def exists(self) -> bool:
        return self.manifest_path.exists()

    def create(self, suite_text: str, name: str, spec_dir: Path, plan: list[PlannedRun]) -> None:
        """Write the suite file, the plan and every Run spec. Raises FileExistsError when root holds a suite."""
        if self.exists():
            raise FileExistsError(f"{self.root} already holds a suite; use --resume to continue it")
        for directory in (self.root, self.root / "specs", self.root / "runs", self.root / "logs"):
            make_directory(directory, PUBLIC_DIRECTORY)
        write_bytes(self.root / "suite.yaml", suite_text.encode(), mode=PUBLIC_FILE)
        for run in plan:
            write_bytes(self.root / run.spec_file, spec_yaml(run.spec).encode(), mode=PUBLIC_FILE)
        # suite.json last: a suite directory without it holds no suite yet.
        manifest = SuiteManifest.model_validate({"schema": SUITE, "name": name, "created_at": utc_now(), "spec_dir": str(spec_dir),
                                                 "runs": [run.to_json() for run in plan]})
        write_json(self.manifest_path, manifest.to_json(), mode=PUBLIC_FILE)

    def read_manifest(self) -> SuiteManifest:
        """suite.json. Raises RecordError when it is missing, corrupt, of another schema, not a suite's plan (naming the
        first field that is not as SuiteManifest says), or plans a Run whose paths are not runs/NAME and specs/NAME.yaml
        for a plain NAME, or two Runs with one name."""
        manifest = parse(SuiteManifest, self.manifest_path, safe_read.read_record(self.root, "suite.json", SUITE))
        seen: set[str] = set()
        for number, run in enumerate(manifest.runs):
            name = run.name
            if not _RUN_NAME.match(name):
                raise record_schema.RecordError(self.manifest_path, f"runs.{number}.name: {str(name)[:80]!r} is not a plain name")
            if (run.run_dir, run.spec) != (f"runs/{name}", f"specs/{name}.yaml"):
                raise record_schema.RecordError(self.manifest_path, f"runs.{number}: its run_dir and spec must be runs/{name} and "
                                                                    f"specs/{name}.yaml")
            if name.lower() in seen:
                raise record_schema.RecordError(self.manifest_path, f"runs.{number}.name: {name} is planned twice")
            seen.add(name.lower())
        return manifest

    def lock(self) -> BinaryIO:
        """Lock the suite for this process (released when the file closes or the process dies).

        Raises SuiteBusy, and RecordError when the lock file is a link or not a plain file."""
        handle = safe_read.open_for_writing(self.root, "lock", append=True)
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise SuiteBusy(f"another process is running the suite in {self.root}") from None
        return handle

    def append(self, event: SuiteEvent) -> None:
        """Append event durably (write, fsync), stamped with its schema and the time."""
        logged = SUITE_EVENT_ADAPTER.validate_python({**event.to_json(), "schema": SUITE_EVENT, "time": round(time.time(), 3)})
        line = json.dumps(logged.to_json(), sort_keys=True) + "\n"
        fd = os.open(self.events_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        try:
            os.write(fd, line.encode())
            os.fsync(fd)
        finally:
            os.close(fd)

    def append_event(self, kind: SuiteEventType | str, **fields: Any) -> None:
        """Append the event of type kind with fields, as append does. Raises ValueError (a pydantic ValidationError)
        when kind is not a SuiteEventType or a field is not one of its event's (nothing is written then)."""
        self.append(SUITE_EVENT_ADAPTER.validate_python({"type": kind, **fields}))

    def events(self) -> list[SuiteEvent]:
        """The logged events in order; a torn last line is skipped. Raises RecordError (a link, not a file, too large),
        and its subclass events.EventLogError (naming the line) for any other line that is not a suite event."""
        try:
            data = safe_read.read_bytes(self.root, "suite-events.jsonl", safe_read.MAX_EVENTS_BYTES)
        except record_schema.RecordError as exc:
            if exc.reason == "missing":
                return []
            raise
        return parse_log(self.events_path, data, SUITE_EVENT_ADAPTER)

    def open_log(self, name: str, suffix: str, *, append: bool) -> BinaryIO:
        """logs/NAME+suffix opened to append or from empty, never through a link or a hard link. Raises RecordError."""
        return safe_read.open_for_writing(self.root, f"logs/{name}{suffix}", append=append)

    def read_log(self, name: str, suffix: str) -> bytes:
        """logs/NAME+suffix, at most safe_read.MAX_OUTPUT_BYTES. Raises RecordError."""
        return safe_read.read_bytes(self.root, f"logs/{name}{suffix}", safe_read.MAX_OUTPUT_BYTES)

    def run_problem(self, run: PlannedRunRecord | Mapping[str, Any]) -> str | None:
        """Why the Run's run directory cannot be used (runs/NAME is a link or not a directory), or None."""
        run = planned(run)
        found = safe_read.kind(self.root, run.run_dir)
        if found in (None, "dir"):
            return None
        return f"{run.run_dir}: " + ("a symbolic link (not followed)" if found == "link" else "not a directory")


def planned(run: PlannedRunRecord | Mapping[str, Any]) -> PlannedRunRecord:
    """A planned Run given as its model or as its JSON form (`SuiteManifest["runs"]`), as its model. Raises ValueError
    (a pydantic ValidationError) when the JSON form is not a planned Run."""
    return run if isinstance(run, PlannedRunRecord) else PlannedRunRecord.model_validate(run)


def is_done(run_dir: Path) -> bool:
    """Whether a Run of the suite needs no resuming: its run.json says "done" (a Run whose log is ahead of its run.json
    is resumed, which catches run.json up). False for a Run never started or unreadable, and when run_dir is a link."""
    if run_dir.is_symlink():
        return False
    try:
        stored = RunDirectory(run_dir).read_stored_manifest()
    except record_schema.RecordError:
        return False
    return stored is not None and stored.phase is Phase.DONE


def run_phase(run_dir: Path) -> str:
    """Where a Run of the suite stands, as its records show it (`RunDirectory.read_manifest`): "pending" (never
    started), "done", or its phase ("agent", ...; "unreadable", also when run_dir is a link)."""
    if run_dir.is_symlink():
        return "unreadable"
    records = RunDirectory(run_dir)
    if not records.events_path.exists():
        return "pending"
    try:
        return records.read_manifest().current_phase.value
    except record_schema.RecordError:
        return "unreadable"
