"""Shared CLI pieces: consoles, the exit-code scheme, error printing (text or JSON), option parsing."""

from __future__ import annotations

import importlib
import json
import sys
import tempfile
from contextvars import ContextVar
from enum import IntEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import typer
from rich.console import Console
from rich.text import Text

from orchestrator.cli.terminal import plain
from orchestrator.kernel.infrastructure import InfraErrorCode, InfrastructureError
from orchestrator.kernel.units import parse_bytes

if TYPE_CHECKING:
    from orchestrator.images.catalogue import EnvironmentPackage

# Off a terminal (pipes, CI logs, tests) tables get room instead of 80 columns.
out = Console(soft_wrap=True, width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True, soft_wrap=True)


class ExitCode(IntEnum):
    """Every command's exit status (docs/commands.md, "Exit status")."""

    OK = 0
    BAD_INPUT = 1  # a spec, Program, path, name or record the user gave is wrong; or a check the command ran failed
    USAGE = 2  # the command line itself: unknown option, missing argument (typer's usage errors exit 2 too)
    INFRASTRUCTURE = 3  # the engine, an image build, a registry, a runner, a missing extra: nothing the input could fix
    INTERRUPTED = 130  # stopped by Ctrl-C, SIGTERM or SIGHUP (typer's status for a KeyboardInterrupt)


_KINDS = {ExitCode.BAD_INPUT: "bad_input", ExitCode.USAGE: "usage", ExitCode.INFRASTRUCTURE: "infrastructure"}

# Set by a command given --json: its failures then also print one JSON object on stdout.
_json_output: ContextVar[bool] = ContextVar("json_output", default=False)


def json_mode(enabled: bool) -> None:
    """Make this command's errors print as JSON on stdout as well (call first in a command taking --json)."""
    _json_output.set(enabled)


def print_json(document: Any) -> None:
    """Print one JSON object on stdout: the whole output of a command given --json."""
    print(json.dumps(document))


def parse_size(text: str) -> int:
    """Return the byte count of a size such as 512m, 1g, 1.5GiB or 1048576. Raises typer.BadParameter."""
    try:
        return parse_bytes(text)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


def fail(message: str, code: ExitCode = ExitCode.BAD_INPUT, *, problems: list[str] | None = None, error_code: str = "") -> NoReturn:
    """Print the error (one line, then one line per problem) on stderr and exit with code.

    Under --json stdout gets `{"error": {"kind", "code", "message", "problems"}, "exit_code"}` too.
    """
    code = ExitCode(code)
    # Messages quote outside text (a spec's values, an image's log, a record): printed plainly, never as markup.
    err.print(Text.assemble(("error:", "bold red"), " ", plain(message)), highlight=False)
    for problem in problems or ():
        err.print(Text.assemble("  ", plain(problem)), highlight=False)
    if _json_output.get():
        print_json({"error": {"kind": _KINDS[code], "code": error_code or _KINDS[code], "message": message, "problems": problems or []},
                    "exit_code": int(code)})
    raise typer.Exit(int(code))


def usage(message: str) -> NoReturn:
    """A command line that cannot mean anything (e.g. two arguments that exclude each other): exit 2."""
    fail(message, ExitCode.USAGE)


def fail_infrastructure(exc: InfrastructureError, diagnostics_dir: Path | None = None) -> NoReturn:
    """Print one line about an infrastructure error; keep its evidence in a file."""
    if exc.evidence and exc.code is not InfraErrorCode.ENGINE_UNAVAILABLE:
        directory = diagnostics_dir or Path(tempfile.mkdtemp(prefix="epg-diagnostics-"))
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{exc.code.value}.log"
        path.write_text(exc.evidence)
        fail(f"{exc.code.value}: {exc.message} (diagnostics: {path})", ExitCode.INFRASTRUCTURE, error_code=exc.code.value)
    fail(f"{exc.code.value}: {exc.message}", ExitCode.INFRASTRUCTURE, error_code=exc.code.value)


# The optional features: the module each needs and the extra of the epg-orchestrator distribution that installs it
# (pyproject.toml, [project.optional-dependencies]).
EXTRAS = {"kubernetes": "kubernetes", "matplotlib": "reports", "starlette": "view", "uvicorn": "view"}


def missing_extra_message(module: str, feature: str) -> str:
    """The one line that says feature needs the extra that installs module, and the pip command that installs it."""
    extra = EXTRAS[module]
    return f"{feature} needs the optional package {module}: pip install 'epg-orchestrator[{extra}]'"


def require_extra(module: str, feature: str) -> None:
    """Import module (one of EXTRAS) for feature; when it cannot be imported, fail with the one line that names its
    extra (exit 3, error code `missing_extra`)."""
    try:
        importlib.import_module(module)
    except ImportError:
        fail(missing_extra_message(module, feature), ExitCode.INFRASTRUCTURE, error_code="missing_extra")


def optional_module_missing(exc: ImportError) -> str | None:
    """The module of EXTRAS that exc failed to import, or None when exc is about any other module."""
    root = (exc.name or "").split(".")[0]
    return root if root in EXTRAS else None


def with_built_benchmarks(base: str, environments: list[Path] | None) -> list[EnvironmentPackage]:
    """The catalogue's packages (`discover` of environments' roots), an EvoPolicyGym package's with the Benchmarks its
    built image's label names (the engine is asked only when there is one; nothing is built). Without an engine,
    packages as they are (every EvoPolicyGym one not built), said on stderr. Raises CatalogueError."""
    from orchestrator.backends.engine import DockerEngine
    from orchestrator.cli.options import environment_roots
    from orchestrator.images.builder import ImageBuilder
    from orchestrator.images.catalogue import discover

    packages = discover(environment_roots(environments))
    if all(package.evopolicygym is None for package in packages):
        return packages

    try:
        client = DockerEngine.connect(timeout_s=10).client
    except InfrastructureError as exc:
        err.print(f"[yellow]{exc.message}: the Benchmarks of EvoPolicyGym packages are known once their images are built[/]")
        return packages
    return ImageBuilder(client, base=base, environments=environment_roots(environments)).packages()
