"""Shared fixtures: Programs written from source text."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest


@pytest.fixture
def write_program(tmp_path: Path):
    """Return a function that writes a Program (policy.py plus extra files) and returns its directory."""
    counter = iter(range(1_000_000))

    def write(source: str, **extra_files: str) -> Path:
        directory = tmp_path / f"program-{next(counter)}"
        directory.mkdir()
        (directory / "policy.py").write_text(textwrap.dedent(source))
        for name, text in extra_files.items():
            (directory / name).write_text(textwrap.dedent(text))
        return directory

    return write
