"""The packaged baseline Program of the dial Benchmark."""

from __future__ import annotations

from importlib.resources import as_file, files

from evopolicygym import Program


def baseline_program() -> Program:
    """Return a snapshot of `programs/baseline/`, which always answers a digit in range."""
    with as_file(files("strict_actions").joinpath("programs", "baseline")) as directory:
        return Program.from_directory(directory)


__all__ = ["baseline_program"]
