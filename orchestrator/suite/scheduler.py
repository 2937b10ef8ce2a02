"""Runs the Runs of a suite, at most `runs_at_once` at a time, each as its own `epg-orchestrate run` process.

A Run of a suite is exactly what the command makes of its spec: the scheduler
starts `epg-orchestrate run specs/NAME.yaml -o runs/NAME --json` for a Run
never started and `epg-orchestrate run --resume runs/NAME --json` for one that
was interrupted; a Run whose run.json says "done" stays finished. Processes,
not threads: each Run's Host (its Host API server, runner clients, pool) keeps
its own interpreter and GIL, a Run that fails or crashes ends alone, and the
owner label of its containers is its own process, so the next start of any
orchestrator reaps exactly the leftovers of a dead Run.

Each Run process dies with the scheduler (PR_SET_PDEATHSIG): a killed suite
leaves killed Runs, which their resume was made for, never a Run going on
unsupervised beside a resumed one. SIGINT, SIGTERM or SIGHUP to the scheduler
stops its Runs as Ctrl-C stops a Run (cleanly), then raises KeyboardInterrupt.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from orchestrator.records import safe_read
from orchestrator.records import schema as record_schema
from orchestrator.records.events import SubmissionAdmitted, SubmissionCompleted
from orchestrator.records.models import PlannedRunRecord
from orchestrator.records.progress import SuiteNotify, SuiteProgress
from orchestrator.records.run_dir import RunDirectory
from orchestrator.suite.directory import SuiteDirectory, is_done, run_phase

# Run in the child before it becomes `epg-orchestrate`: die with the scheduler (PR_SET_PDEATHSIG is 1, kept across
# execve), and give up if the scheduler is already gone. argv: the scheduler's pid, then the command's arguments.
_DIE_WITH_PARENT = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    os._exit(1)\n"
    "os.execv(sys.executable, [sys.executable, '-m', 'orchestrator.cli.app', *sys.argv[2:]])\n"
)
POLL_S = 0.25
STOP_GRACE_S = 60.0


@dataclass(frozen=True, slots=True, kw_only=True)
class SchedulerOptions:
    runs_at_once: int = 1
    base: str = "auto"
    environments: list[Path] | None = None
    scope: str = ""
    allow_credentials: tuple[str, ...] = ()  # --allow-credential NAME@HOST, given to every Run


@dataclass(frozen=True, slots=True, kw_only=True)
class RunProgress:
    """What a running Run's records say so far."""

    name: str
    phase: str
    submissions: int
    episodes: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RunOutcome:
    """How one invocation of a Run ended: the command's exit status and what its run.json says."""

    name: str
    exit_code: int
    phase: str
    terminal_reason: str | None
    score: float | None
    seconds: float
    error: str | None = None


@dataclass(slots=True)
class _Going:
    run: PlannedRunRecord
    process: subprocess.Popen[bytes]
    started: float
    logs: list[BinaryIO] = field(default_factory=list)


def run_command(directory: SuiteDirectory, run: PlannedRunRecord | Mapping[str, Any], options: SchedulerOptions) -> list[str]:
    """The `epg-orchestrate` arguments that start or resume this Run (its planned Run, or the JSON form of one)."""
    run_dir = directory.run_dir(run)
    if RunDirectory(run_dir).events_path.exists():
        argv = ["run", "--resume", str(run_dir)]
    else:
        argv = ["run", str(directory.spec_file(run)), "--output", str(run_dir)]
    argv += ["--json", "--base", options.base]
    for root in options.environments or ():
        argv += ["--environments", str(root)]
    if options.scope:
        argv += ["--scope", options.scope]
    for grant in options.allow_credentials:
        argv += ["--allow-credential", grant]
    return argv


class SuiteScheduler:
    """Executes the Runs of one suite directory that are not done. Not thread-safe: one scheduler per suite directory."""

    def __init__(self, directory: SuiteDirectory, options: SchedulerOptions, notify: SuiteNotify) -> None:
        self._directory = directory
        self._options = options
        self._notify = notify
        self._going: dict[str, _Going] = {}
        self._refused: list[RunOutcome] = []  # Runs not started: their paths in the suite directory were unsafe
        self._stopping: int | None = None

    def execute(self) -> list[RunOutcome]:
        """Run every Run not done yet; return how each invocation ended, in order of ending.

        Raises RecordError when suite.json is unreadable, SuiteBusy when another process runs this suite,
        KeyboardInterrupt after SIGINT, SIGTERM or SIGHUP once every Run has stopped.
        A Run that fails does not stop the others.
        """
        runs = self._directory.read_manifest().runs
        lock = self._directory.lock()  # held until this process ends, however it ends
        waiting = [run for run in runs if not is_done(self._directory.run_dir(run))]
        self._directory.append_event("suite_started", runs=len(runs), waiting=len(waiting), runs_at_once=self._options.runs_at_once)
        self._notify(SuiteProgress.PLAN, {"total": len(runs), "done": len(runs) - len(waiting), "waiting": [r.name for r in waiting]})
        outcomes: list[RunOutcome] = []
        previous = {sig: signal.signal(sig, self._stop) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
        try:
            while (waiting and self._stopping is None) or self._going:
                while waiting and self._stopping is None and len(self._going) < self._options.runs_at_once:
                    self._start(waiting.pop(0))
                outcomes += self._refused
                self._refused.clear()
                for name in [name for name, going in self._going.items() if going.process.poll() is not None]:
                    outcomes.append(self._ended(self._going.pop(name)))
                self._notify(SuiteProgress.PROGRESS, {"runs": [self._progress(going.run) for going in self._going.values()]})
                time.sleep(POLL_S)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        self._directory.append_event("suite_stopped" if self._stopping else "suite_ended")
        lock.close()
        if self._stopping is not None:
            # End as every command ends on Ctrl-C, SIGTERM or SIGHUP (exit status 130), now that the Runs have stopped.
            raise KeyboardInterrupt(f"signal {signal.Signals(self._stopping).name}")
        return outcomes

    def _start(self, run: PlannedRunRecord) -> None:
        directory, name = self._directory, run.name
        argv = run_command(directory, run, self._options)
        resumed = argv[1] == "--resume"
        problem = directory.run_problem(run)
        if problem is None and not resumed and safe_read.kind(directory.root, run.spec) != "file":
            problem = f"{run.spec}: missing, a link or not a regular file"
        try:
            if problem is not None:
                raise record_schema.RecordError(directory.run_dir(run), problem)
            log = directory.open_log(name, ".log", append=True)
            try:
                output = directory.open_log(name, ".json", append=False)
            except BaseException:
                log.close()
                raise
        except record_schema.RecordError as exc:
            # Not started: its suite directory was tampered with. The others go on.
            self._refused.append(RunOutcome(name=name, exit_code=1, phase="unreadable", terminal_reason=None, score=None,
                                            seconds=0.0, error=str(exc)))
            directory.append_event("run_refused", run=name, error=str(exc))
            self._notify(SuiteProgress.ENDED, {"outcome": self._refused[-1]})
            return
        log.write(f"== {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} epg-orchestrate {' '.join(argv)}\n".encode())
        log.flush()
        # Its own session: a Ctrl-C at the terminal reaches the scheduler alone, which stops each Run once.
        process = subprocess.Popen(
            [sys.executable, "-c", _DIE_WITH_PARENT, str(os.getpid()), *argv],
            stdin=subprocess.DEVNULL, stdout=output, stderr=log, start_new_session=True,
        )
        self._going[name] = _Going(run=run, process=process, started=time.monotonic(), logs=[log, output])
        directory.append_event("run_started", run=name, resume=resumed, pid=process.pid, argv=argv)
        self._notify(SuiteProgress.STARTED, {"name": name, "resume": resumed})

    def _ended(self, going: _Going) -> RunOutcome:
        for handle in going.logs:
            handle.close()
        name = going.run.name
        code = going.process.returncode
        outcome = _outcome(self._directory, going.run, code, time.monotonic() - going.started)
        self._directory.append_event("run_ended", run=name, exit_code=code, phase=outcome.phase, score=outcome.score,
                                     seconds=round(outcome.seconds, 3), error=outcome.error)
        self._notify(SuiteProgress.ENDED, {"outcome": outcome})
        return outcome

    def _progress(self, run: PlannedRunRecord) -> RunProgress:
        records = RunDirectory(self._directory.run_dir(run))
        try:
            events = records.events()
        except record_schema.RecordError:
            return RunProgress(name=run.name, phase="unreadable", submissions=0, episodes=0)
        completed = [e for e in events if isinstance(e, SubmissionCompleted)]
        admitted = {e.id: len(e.indices or ()) for e in events if isinstance(e, SubmissionAdmitted)}
        return RunProgress(name=run.name, phase=run_phase(records.root), submissions=len(completed),
                           episodes=sum(admitted.get(e.id, 0) for e in completed))

    def _stop(self, signum: int, frame: Any) -> None:
        """Stop every Run as Ctrl-C would (KeyboardInterrupt: its sandbox closes), SIGKILL what lingers."""
        if self._stopping is not None:
            return
        self._stopping = signum
        self._notify(SuiteProgress.STOPPING, {"signal": signal.Signals(signum).name, "runs": list(self._going)})
        for going in self._going.values():
            going.process.send_signal(signal.SIGINT)
        deadline = time.monotonic() + STOP_GRACE_S
        for going in self._going.values():
            try:
                going.process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                going.process.kill()
                going.process.wait()


def _outcome(directory: SuiteDirectory, run: PlannedRunRecord, code: int, seconds: float) -> RunOutcome:
    """What the ended invocation left: its error line (from its --json output) or its run.json."""
    error = None
    try:
        printed = json.loads(directory.read_log(run.name, ".json") or b"{}")
        if isinstance(printed, dict) and isinstance(printed.get("error"), dict):
            error = str(printed["error"].get("message"))[:2000]
    except (record_schema.RecordError, ValueError, RecursionError):
        pass  # killed before it printed (or the log was tampered with): the exit status says enough
    if error is None and code != 0:
        error = f"exit status {code} (see {directory.log(run.name, '.log')})"
    try:
        manifest = RunDirectory(directory.run_dir(run)).read_manifest()
    except record_schema.RecordError as exc:
        return RunOutcome(name=run.name, exit_code=code, phase="unreadable", terminal_reason=None, score=None,
                          seconds=seconds, error=error or str(exc))
    reason = manifest.terminal_reason
    return RunOutcome(name=run.name, exit_code=code, phase=run_phase(directory.run_dir(run)),
                      terminal_reason=None if reason is None else str(reason), score=manifest.assessment_score,
                      seconds=seconds, error=error)
