"""`epg-orchestrate view`: the local web app over a runs or suites directory (the `view` extra: starlette, uvicorn)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from orchestrator.cli.common import ExitCode, fail, require_extra

VIEW_PACKAGES = ("starlette", "uvicorn")


def view(
    directory: Annotated[Path, typer.Argument(help="A runs or suites directory, a run directory or a suite directory.")] = Path("runs"),
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port on 127.0.0.1 (0: any free port).")] = 0,
) -> None:
    """Serve a read-only, live web view of the Runs and suites in DIRECTORY on 127.0.0.1; print its URL and wait.

    The URL holds a random access token (without it the server answers 401): open it in a browser on this machine.
    The index, each Run and each suite update as Runs write to the directory. Ctrl-C stops the server.
    Exit status: 130 stopped (Ctrl-C, SIGTERM), 1 DIRECTORY is not a directory, 3 the `view` extra is missing or the port
    cannot be bound.
    """
    for package in VIEW_PACKAGES:
        require_extra(package, "view")
    if not directory.is_dir():
        fail(f"{directory}: not a directory", ExitCode.BAD_INPUT)
    from orchestrator.view.app import serve  # starlette and uvicorn: only when serving

    def announce(url: str) -> None:
        print(f"Serving {directory} at {url}", flush=True)
        print("Open the URL in a browser on this machine; Ctrl-C stops the server.", file=sys.stderr, flush=True)

    try:
        serve(directory.resolve(), port, announce)
    except OSError as exc:
        fail(f"cannot serve on 127.0.0.1:{port}: {exc.strerror or exc}", ExitCode.INFRASTRUCTURE, error_code="port_unavailable")
    # uvicorn stops on SIGINT and SIGTERM with handlers of its own, then passes the signal on to the handler it found;
    # when that was "ignore" (a command started in the background by a shell) nothing is raised and serve returns.
    # It returns only when stopped, so the status says so either way.
    raise typer.Exit(int(ExitCode.INTERRUPTED))
