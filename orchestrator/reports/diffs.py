"""How one Program differs from another, in bounded time: a unified diff under a size bound, line counts above it.

difflib's matcher is quadratic (or worse) in the lines it compares, and a Program may hold data files of tens of
thousands of lines: two such Programs would keep `runs report` or `runs export --program diff` busy for hours. So the
lines of both sides of every text file diffed for one pair of Programs are counted against DIFF_MAX_LINES (and their
bytes against DIFF_MAX_BYTES); a file that would pass the bound is not diffed but summarised in linear time: its line
counts before and after, and the lines added and removed as a multiset difference of its lines (a lower bound of what
a diff would show; equal to it when no line moved).
"""

from __future__ import annotations

import difflib
from collections import Counter
from dataclasses import dataclass

from orchestrator.kernel.program import Program

DIFF_MAX_LINES = 4000  # lines of both sides of every file diffed for one pair of Programs
DIFF_MAX_BYTES = 1 << 20  # and their bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class FileChange:
    """One file that differs: its unified diff lines ("" for a summarised or binary file) and its counts."""

    path: str
    before: bytes | None  # None: the file is new
    after: bytes | None  # None: the file was removed
    text: bool  # both sides are UTF-8 text
    diff: tuple[str, ...]  # unified diff lines, with their line ends; empty when summarised or binary
    summarised: bool  # above the bound: counted, not diffed
    lines_before: int
    lines_after: int
    lines_added: int
    lines_removed: int

    def summary(self) -> dict[str, int | str]:
        return {"path": self.path, "lines_before": self.lines_before, "lines_after": self.lines_after,
                "lines_added": self.lines_added, "lines_removed": self.lines_removed}


def program_changes(before: Program, after: Program, *, max_lines: int = DIFF_MAX_LINES,
                    max_bytes: int = DIFF_MAX_BYTES) -> list[FileChange]:
    """Every file that differs from before to after, by path, diffed while the pair's bound lasts and counted after."""
    old = {f.path: f.data for f in before.files}
    new = {f.path: f.data for f in after.files}
    lines_left, bytes_left = max_lines, max_bytes
    changes = []
    for path in sorted(old.keys() | new.keys()):
        a, b = old.get(path), new.get(path)
        if a == b:
            continue
        try:
            a_text, b_text = (a or b"").decode("utf-8"), (b or b"").decode("utf-8")
        except UnicodeDecodeError:
            changes.append(FileChange(path=path, before=a, after=b, text=False, diff=(), summarised=False,
                                      lines_before=0, lines_after=0, lines_added=0, lines_removed=0))
            continue
        a_lines, b_lines = a_text.splitlines(keepends=True), b_text.splitlines(keepends=True)
        size = len(a or b"") + len(b or b"")
        if len(a_lines) + len(b_lines) > lines_left or size > bytes_left:
            added, removed = _counted(a_lines, b_lines)
            changes.append(FileChange(path=path, before=a, after=b, text=True, diff=(), summarised=True, lines_before=len(a_lines),
                                      lines_after=len(b_lines), lines_added=added, lines_removed=removed))
            continue
        lines_left -= len(a_lines) + len(b_lines)
        bytes_left -= size
        diff = tuple(difflib.unified_diff(a_lines, b_lines, fromfile="/dev/null" if a is None else f"a/{path}",
                                          tofile="/dev/null" if b is None else f"b/{path}"))
        hunks = diff[2:]  # after the --- and +++ lines
        added = sum(1 for line in hunks if line.startswith("+"))
        removed = sum(1 for line in hunks if line.startswith("-"))
        changes.append(FileChange(path=path, before=a, after=b, text=True, diff=diff, summarised=False, lines_before=len(a_lines),
                                  lines_after=len(b_lines), lines_added=added, lines_removed=removed))
    return changes


def _counted(a_lines: list[str], b_lines: list[str]) -> tuple[int, int]:
    """Lines added and removed as the multiset difference of the two sides' lines (line ends ignored): linear time."""
    old = Counter(line.rstrip("\r\n") for line in a_lines)
    new = Counter(line.rstrip("\r\n") for line in b_lines)
    return sum((new - old).values()), sum((old - new).values())
