"""Shared CLI pieces: consoles, error printing, option parsing."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import NoReturn

import typer
from rich.console import Console

from orchestrator.kernel.codes import InfraErrorCode, InfrastructureError
from orchestrator.kernel.units import parse_bytes

# Off a terminal (pipes, CI logs, tests) tables get room instead of 80 columns.
out = Console(soft_wrap=True, width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True, soft_wrap=True)

EXIT_USER_ERROR = 1
EXIT_INFRASTRUCTURE = 3

def parse_size(text: str) -> int:
    """Return the byte count of a size such as 512m, 1g, 1.5GiB or 1048576. Raises typer.BadParameter."""
    try:
        return parse_bytes(text)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


def fail(message: str, code: int = EXIT_USER_ERROR) -> NoReturn:
    err.print(f"[bold red]error:[/] {message}", highlight=False)
    raise typer.Exit(code)


def fail_infrastructure(exc: InfrastructureError, diagnostics_dir: Path | None = None) -> NoReturn:
    """Print one line about an infrastructure error; keep its evidence in a file."""
    if exc.evidence and exc.code is not InfraErrorCode.ENGINE_UNAVAILABLE:
        directory = diagnostics_dir or Path(tempfile.mkdtemp(prefix="epg-diagnostics-"))
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{exc.code.value}.log"
        path.write_text(exc.evidence)
        fail(f"{exc.code.value}: {exc.message} (diagnostics: {path})", EXIT_INFRASTRUCTURE)
    fail(f"{exc.code.value}: {exc.message}", EXIT_INFRASTRUCTURE)
