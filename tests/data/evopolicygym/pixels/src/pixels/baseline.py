"""The packaged baseline Program of the pixel grid Benchmark."""

from __future__ import annotations

from importlib.resources import as_file, files

from evopolicygym import Program


def baseline_program() -> Program:
    """Return a snapshot of `programs/baseline/`, which reads the frame and walks to the red cell."""
    with as_file(files("pixels").joinpath("programs", "baseline")) as directory:
        return Program.from_directory(directory)


__all__ = ["baseline_program"]
