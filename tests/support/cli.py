"""`epg-orchestrate` as tests call it: in this process through typer's runner, or as a real subprocess.

Both take the same arguments and return the same CliResult, so a test moves from one to the other by its import.
Use invoke_cli for the CLI's contract (exit codes, messages, JSON shapes); use run_cli where the process boundary
is what is tested (signals, a Run other processes watch, an installed entry point) or the command runs for minutes.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True, slots=True, kw_only=True)
class CliResult:
    """How one `epg-orchestrate` command ended: its exit code and what it printed on stdout and stderr."""

    exit_code: int
    stdout: str
    stderr: str

    def json(self) -> dict[str, Any]:
        """Return the one JSON object the command printed on stdout (its whole output under --json).

        Raises AssertionError when stdout is not exactly one line holding a JSON object.
        """
        lines = self.stdout.strip().splitlines()
        assert len(lines) == 1, self.stdout[-2000:] + self.stderr[-2000:]
        document = json.loads(lines[0])
        assert isinstance(document, dict), document
        return document


def _environment(scope: str, env: Mapping[str, str | None] | None) -> dict[str, str | None]:
    return {"EPG_SCOPE": scope, **(env or {})}


def run_cli(*args: str, scope: str = "", env: Mapping[str, str | None] | None = None, cwd: Path = REPO,
            timeout: float = 600) -> CliResult:
    """Run `python -m orchestrator.cli.app ARGS` in a subprocess from cwd, its resources labelled with scope.

    env adds to (or overrides) this process's environment; a None value removes that variable. Returns the CliResult;
    raises subprocess.TimeoutExpired when the command has not ended after timeout seconds (the subprocess is killed first).
    """
    environment = {**os.environ, **_environment(scope, env)}
    process = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli.app", *args], capture_output=True, text=True,
        env={key: value for key, value in environment.items() if value is not None}, cwd=cwd, timeout=timeout, check=False,
    )
    return CliResult(exit_code=process.returncode, stdout=process.stdout, stderr=process.stderr)


@contextlib.contextmanager
def _deadline(timeout: float) -> Iterator[None]:
    """Raise TimeoutError in the main thread after timeout seconds (no deadline off the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum: int, frame: object) -> None:
        raise TimeoutError(f"the command did not end within {timeout} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def invoke_cli(*args: str, scope: str = "", env: Mapping[str, str | None] | None = None, cwd: Path = REPO,
               timeout: float = 600) -> CliResult:
    """Run the command ARGS in this process with typer's CliRunner, from cwd, its resources labelled with scope.

    env adds to (or overrides) the environment during the call (a None value removes that variable), and the command
    starts from fresh context variables as a new process would. Returns the CliResult; raises TimeoutError after
    timeout seconds, and re-raises any exception the command let escape (a subprocess would have printed it as a
    traceback).
    """
    from typer.testing import CliRunner

    from orchestrator.cli.app import app

    runner = CliRunner()
    with contextlib.chdir(cwd), _deadline(timeout):
        result = contextvars.Context().run(runner.invoke, app, list(args), env=_environment(scope, env), prog_name="epg-orchestrate")
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return CliResult(exit_code=result.exit_code, stdout=result.stdout, stderr=result.stderr)
