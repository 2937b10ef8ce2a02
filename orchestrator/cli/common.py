"""Shared CLI pieces: consoles, error printing, option parsing."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import NoReturn

import typer
from rich.console import Console

from orchestrator.kernel.codes import InfraErrorCode, InfrastructureError

out = Console()
err = Console(stderr=True, soft_wrap=True)

EXIT_USER_ERROR = 1
EXIT_INFRASTRUCTURE = 3

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmg]?)i?b?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def parse_size(text: str) -> int:
    """Return the byte count of a size such as 512m, 1g, 1.5GiB or 1048576. Raises typer.BadParameter."""
    match = _SIZE.match(text)
    if not match:
        raise typer.BadParameter(f"{text!r} is not a size like 512m or 2g")
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


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
