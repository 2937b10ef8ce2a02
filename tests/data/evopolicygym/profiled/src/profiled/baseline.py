"""The packaged baseline Program of the drifting-point Benchmark (the same for every profile)."""

from __future__ import annotations

from importlib.resources import as_file, files

from evopolicygym import Program


def baseline_program() -> Program:
    """Return a snapshot of `programs/baseline/`, which pushes the point back towards 0."""
    with as_file(files("profiled").joinpath("programs", "baseline")) as directory:
        return Program.from_directory(directory)


__all__ = ["baseline_program"]
