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
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path
from typing import Any, BinaryIO

from orchestrator.records import schema as record_schema
from orchestrator.records.atomic import PUBLIC_DIRECTORY, PUBLIC_FILE, make_directory, write_bytes, write_json
from orchestrator.records.provenance import utc_now
from orchestrator.records.run_dir import RunDirectory
from orchestrator.suite.spec import PlannedRun, spec_yaml

SUITE = "epg.suite/1"  # suite.json
SUITE_EVENT = "epg.suite_event/1"  # each line of a suite's suite-events.jsonl


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
        """suite.json. Raises RecordError when it is missing, corrupt or of another schema."""
        manifest = record_schema.read_record(self.manifest_path, SUITE)
        runs = manifest.get("runs")
        if not isinstance(runs, list) or not all(isinstance(r, dict) and {"name", "run_dir", "spec"} <= set(r) for r in runs):
            raise record_schema.RecordError(self.manifest_path, "runs: not a list of planned Runs")
        return manifest

    def lock(self) -> BinaryIO:
        """Lock the suite for this process (released when the file closes or the process dies). Raises SuiteBusy."""
        handle = open(self.root / "lock", "ab")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise SuiteBusy(f"another process is running the suite in {self.root}") from None
        return handle

    def append_event(self, kind: str, **fields: Any) -> None:
        """Append one event durably (write, fsync)."""
        line = json.dumps({"schema": SUITE_EVENT, "type": kind, "time": round(time.time(), 3), **fields}, sort_keys=True) + "\n"
        fd = os.open(self.events_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
            os.fsync(fd)
        finally:
            os.close(fd)

    def events(self) -> list[dict[str, Any]]:
        """The logged events in order; a torn last line is skipped."""
        if not self.events_path.exists():
            return []
        found = []
        for line in self.events_path.read_text().splitlines():
            try:
                found.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return found


def run_phase(run_dir: Path) -> str:
    """Where a Run of the suite stands: "pending" (never started), "done", or its phase ("agent", ...; "unreadable")."""
    records = RunDirectory(run_dir)
    if not records.events_path.exists():
        return "pending"
    try:
        return str(records.read_manifest().get("phase") or "agent")
    except record_schema.RecordError:
        return "unreadable"
