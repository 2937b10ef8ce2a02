"""The packaged baseline Program of the counter Benchmark."""

from __future__ import annotations

from importlib.resources import as_file, files

from evopolicygym import Program


def baseline_program() -> Program:
    """Return a snapshot of `programs/baseline/`, the Program that steps towards the target."""
    with as_file(files("stdlib_counter").joinpath("programs", "baseline")) as directory:
        return Program.from_directory(directory)


__all__ = ["baseline_program"]
