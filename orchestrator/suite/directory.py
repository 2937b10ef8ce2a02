"""The suite directory: the suite as given, its plan, one ordinary run directory per Run, logs and an event log.

Layout (relative to the suite directory):

    suite.yaml          the suite file as given
    suite.json          the plan (schema epg.suite/1): every Run, its Benchmark, family, agent, repeat, seed
    specs/NAME.yaml     the Run spec of each Run, what `epg-orchestrate run` reads
    runs/NAME/          the run directory `epg-orchestrate run specs/NAME.yaml -o runs/NAME` makes
    logs/NAME.log       the Run's progress (stderr of every invocation, appended); NAME.json its last --json output
    suite-events.jsonl  append-only, fsynced: each invocation of a Run and how it ended (not events.jsonl:
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
from pathlib import Path
from typing import Any, BinaryIO

from orchestrator.records import safe_read
from orchestrator.records import schema as record_schema
from orchestrator.records.atomic import PUBLIC_DIRECTORY, PUBLIC_FILE, make_directory, write_bytes, write_json
from orchestrator.records.provenance import utc_now
from orchestrator.records.run_dir import RunDirectory
from orchestrator.suite.spec import PlannedRun, spec_yaml

SUITE = "epg.suite/1"  # suite.json
SUITE_EVENT = "epg.suite_event/1"  # each line of a suite's suite-events.jsonl
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

    def run_dir(self, run: dict[str, Any]) -> Path:
        return self.root / run["run_dir"]

    def spec_file(self, run: dict[str, Any]) -> Path:
        return self.root / run["spec"]

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
        write_json(self.manifest_path, {"schema": SUITE, "name": name, "created_at": utc_now(), "spec_dir": str(spec_dir),
                                        "runs": [run.to_json() for run in plan]}, mode=PUBLIC_FILE)

    def read_manifest(self) -> dict[str, Any]:
        """suite.json. Raises RecordError when it is missing, corrupt, of another schema, or plans a Run whose paths are
        not runs/NAME and specs/NAME.yaml for a plain NAME, or two Runs with one name."""
        manifest = safe_read.read_record(self.root, "suite.json", SUITE)
        runs = manifest.get("runs")
        if not isinstance(runs, list) or not all(isinstance(r, dict) and {"name", "run_dir", "spec"} <= set(r) for r in runs):
            raise record_schema.RecordError(self.manifest_path, "runs: not a list of planned Runs")
        seen: set[str] = set()
        for number, run in enumerate(runs):
            name = run["name"]
            if not isinstance(name, str) or not _RUN_NAME.match(name):
                raise record_schema.RecordError(self.manifest_path, f"runs.{number}.name: {str(name)[:80]!r} is not a plain name")
            if (run["run_dir"], run["spec"]) != (f"runs/{name}", f"specs/{name}.yaml"):
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

    def append_event(self, kind: str, **fields: Any) -> None:
        """Append one event durably (write, fsync)."""
        line = json.dumps({"schema": SUITE_EVENT, "type": kind, "time": round(time.time(), 3), **fields}, sort_keys=True) + "\n"
        fd = os.open(self.events_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        try:
            os.write(fd, line.encode())
            os.fsync(fd)
        finally:
            os.close(fd)

    def events(self) -> list[dict[str, Any]]:
        """The logged events in order; a torn last line is skipped. Raises RecordError (a link, not a file, too large)."""
        try:
            lines = safe_read.json_lines(self.root, "suite-events.jsonl")
        except record_schema.RecordError as exc:
            if exc.reason == "missing":
                return []
            raise
        found = []
        for line in lines:
            try:
                event = json.loads(line)
            except (json.JSONDecodeError, RecursionError):
                continue
            if isinstance(event, dict):
                found.append(event)
        return found

    def open_log(self, name: str, suffix: str, *, append: bool) -> BinaryIO:
        """logs/NAME+suffix opened to append or from empty, never through a link or a hard link. Raises RecordError."""
        return safe_read.open_for_writing(self.root, f"logs/{name}{suffix}", append=append)

    def read_log(self, name: str, suffix: str) -> bytes:
        """logs/NAME+suffix, at most safe_read.MAX_OUTPUT_BYTES. Raises RecordError."""
        return safe_read.read_bytes(self.root, f"logs/{name}{suffix}", safe_read.MAX_OUTPUT_BYTES)

    def run_problem(self, run: dict[str, Any]) -> str | None:
        """Why the Run's run directory cannot be used (runs/NAME is a link or not a directory), or None."""
        found = safe_read.kind(self.root, run["run_dir"])
        if found in (None, "dir"):
            return None
        return f"{run['run_dir']}: " + ("a symbolic link (not followed)" if found == "link" else "not a directory")


def run_phase(run_dir: Path) -> str:
    """Where a Run of the suite stands: "pending" (never started), "done", or its phase ("agent", ...; "unreadable",
    also when run_dir is a link)."""
    if run_dir.is_symlink():
        return "unreadable"
    records = RunDirectory(run_dir)
    if not records.events_path.exists():
        return "pending"
    try:
        return str(records.read_manifest().get("phase") or "agent")
    except record_schema.RecordError:
        return "unreadable"
