"""Finding a Benchmark package's README, in a source checkout or in its image."""

from __future__ import annotations

from pathlib import Path


def package_readme(module_file: str) -> str:
    """Return the README of the package whose module file is module_file, or "".

    The image builder copies README.md into the module directory; in a source
    checkout it sits at the package root, one level up.
    """
    here = Path(module_file).resolve().parent
    for candidate in (here / "README.md", here.parent / "README.md"):
        if candidate.is_file():
            return candidate.read_text(encoding="utf-8")
    return ""
