"""A Benchmark package's README: finding it (source checkout or image) and cutting out the part the agent reads."""

from __future__ import annotations

from pathlib import Path

AGENT_BEGIN = "<!-- agent:begin -->"
AGENT_END = "<!-- agent:end -->"


class ReadmeMarkerError(ValueError):
    """A README's agent markers are malformed: a begin without its end, an end without its begin, or nested."""


def agent_section(readme: str) -> str:
    """Return the part of a README that the agent reads in its task.

    That part is what lies between a line `<!-- agent:begin -->` and the next line
    `<!-- agent:end -->` (each marker alone on its line; HTML comments, invisible on a rendered
    page). A README may hold several such blocks; the agent reads them in order, joined by a
    blank line. What is outside every block (tests, versions, pins, measurements, development
    notes) is for the package's maintainers and never reaches the agent. A README with no
    marker at all is returned whole, as before the markers existed: a package written for that
    contract keeps giving its agent the same task. Raises ReadmeMarkerError when markers are
    present but do not alternate begin, end, begin, end.
    """
    blocks: list[str] = []
    current: list[str] | None = None
    seen = False
    for number, line in enumerate(readme.splitlines(), start=1):
        marker = line.strip()
        if marker == AGENT_BEGIN:
            seen = True
            if current is not None:
                raise ReadmeMarkerError(f"README line {number}: {AGENT_BEGIN} inside a block that is not closed")
            current = []
        elif marker == AGENT_END:
            seen = True
            if current is None:
                raise ReadmeMarkerError(f"README line {number}: {AGENT_END} without its {AGENT_BEGIN}")
            blocks.append("\n".join(current).strip("\n"))
            current = None
        elif current is not None:
            current.append(line)
    if current is not None:
        raise ReadmeMarkerError(f"README: {AGENT_BEGIN} without its {AGENT_END}")
    if not seen:
        return readme
    return "\n\n".join(block for block in blocks if block) + "\n"


def package_readme(module_file: str) -> str:
    """Return the agent's part of the README of the package whose module file is module_file, or "".

    The image builder copies README.md into the module directory; in a source
    checkout it sits at the package root, one level up. The agent's part is what
    agent_section keeps. Raises ReadmeMarkerError for malformed agent markers.
    """
    here = Path(module_file).resolve().parent
    for candidate in (here / "README.md", here.parent / "README.md"):
        if candidate.is_file():
            return agent_section(candidate.read_text(encoding="utf-8"))
    return ""
