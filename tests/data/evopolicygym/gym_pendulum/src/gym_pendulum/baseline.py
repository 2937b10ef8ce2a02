"""The packaged baseline Program of the Pendulum Benchmark."""

from __future__ import annotations

from importlib.resources import as_file, files

from evopolicygym import Program


def baseline_program() -> Program:
    """Return a snapshot of `programs/baseline/`, a swing-up and PD controller."""
    with as_file(files("gym_pendulum").joinpath("programs", "baseline")) as directory:
        return Program.from_directory(directory)


__all__ = ["baseline_program"]
