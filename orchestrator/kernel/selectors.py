"""Index selectors: the text an agent uses to choose train Episodes of the hidden pool, parsed and formatted.

Grammar (pool indices are 0 to pool_size - 1):

    selector := item ("," item)*
    item     := N | A ":" B        N, A, B: decimal digits 0-9, no sign
    A:B      := the half-open range A, A+1, ..., B-1; A < B

Spaces and tabs are allowed around items and around the numbers of a range
("0 : 2" is "0:2"); nothing else is. The expanded indices must be strictly
increasing across the whole selector: no repeats, no overlaps, in order. So a
selector names each Episode at most once and has exactly one expansion.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from orchestrator.kernel.rejections import RejectionCode, RequestRejected

_ITEM = re.compile(r"[ \t]*([0-9]+)(?:[ \t]*:[ \t]*([0-9]+))?[ \t]*")


class SelectorError(RequestRejected):
    """A selector was refused: INVALID_SELECTOR (malformed or not increasing) or INDEX_OUT_OF_RANGE."""


def parse_selector(text: str, pool_size: int) -> tuple[int, ...]:
    """Return the indices text selects, strictly increasing, each in [0, pool_size).

    Every item is checked for syntax before any index is checked against the
    pool or its neighbours, so a malformed selector is always INVALID_SELECTOR.
    Then items are checked left to right: an item reaching past the pool raises
    INDEX_OUT_OF_RANGE, an item not after the previous one INVALID_SELECTOR.
    Raises SelectorError for a refused selector and ValueError when pool_size
    is not a positive integer.
    """
    if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1:
        raise ValueError(f"pool_size must be a positive integer, not {pool_size!r}")
    if not isinstance(text, str):
        raise SelectorError(RejectionCode.INVALID_SELECTOR, "the selector must be text")
    if not text.strip():
        raise SelectorError(RejectionCode.INVALID_SELECTOR, "the selector is empty: give indices such as 0:8,12")
    items = [_item(position, raw) for position, raw in enumerate(text.split(","), start=1)]

    indices: list[int] = []
    limit = _digits(str(pool_size))
    for start, stop in items:
        # Compared as digit strings: a number with thousands of digits must not reach int().
        if not _less(start, limit) or (stop is not None and _less(limit, stop)):
            raise SelectorError(
                RejectionCode.INDEX_OUT_OF_RANGE,
                f"{_shown(start, stop)} goes outside the pool: its indices run from 0 to {pool_size - 1}",
            )
        first = int(start)
        if indices and first <= indices[-1]:
            raise SelectorError(
                RejectionCode.INVALID_SELECTOR,
                f"index {first} does not come after index {indices[-1]}: indices must be strictly increasing"
                " (no repeats, no overlapping ranges, in order)",
            )
        indices.extend(range(first, int(stop)) if stop is not None else (first,))
    return tuple(indices)


def format_selector(indices: Iterable[int]) -> str:
    """Return the canonical selector of indices: runs of two or more merged into ranges, e.g. (0, 1, 2, 5) -> "0:3,5".

    parse_selector(format_selector(x), n) == x for every x it accepts within
    a pool of n. Raises ValueError when indices is empty, holds a negative or
    non-integer value, or is not strictly increasing.
    """
    values = tuple(indices)
    if not values:
        raise ValueError("a selector selects at least one index")
    for position, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"indices must be non-negative integers, not {value!r}")
        if position and value <= values[position - 1]:
            raise ValueError(f"indices must be strictly increasing: {value} follows {values[position - 1]}")
    parts: list[str] = []
    run_start = previous = values[0]
    for following in values[1:] + (None,):
        if following is not None and following == previous + 1:
            previous = following
            continue
        parts.append(str(run_start) if run_start == previous else f"{run_start}:{previous + 1}")
        if following is not None:
            run_start = previous = following
    return ",".join(parts)


def _item(position: int, raw: str) -> tuple[str, str | None]:
    """Return the (start, stop) digit strings of one item, stop None for a single index."""
    if not raw.strip():
        raise SelectorError(RejectionCode.INVALID_SELECTOR, f"item {position} is empty (two commas in a row, or a comma at an end)")
    match = _ITEM.fullmatch(raw)
    if match is None:
        raise SelectorError(
            RejectionCode.INVALID_SELECTOR,
            f"item {position} ({raw.strip()!r}) is neither an index N nor a range A:B of unsigned decimal integers",
        )
    start = _digits(match.group(1))
    stop = _digits(match.group(2)) if match.group(2) is not None else None
    if stop is not None and not _less(start, stop):
        raise SelectorError(
            RejectionCode.INVALID_SELECTOR,
            f"item {position} ({raw.strip()!r}) is an empty range: A:B selects A to B-1 and needs A < B",
        )
    return start, stop


def _digits(text: str) -> str:
    """text without leading zeros ("0" stays "0")."""
    return text.lstrip("0") or "0"


def _less(a: str, b: str) -> bool:
    """a < b for digit strings without leading zeros, whatever their length."""
    return (len(a), a) < (len(b), b)


def _shown(start: str, stop: str | None) -> str:
    number = start if len(start) <= 20 else start[:20] + "..."
    if stop is None:
        return f"index {number}"
    return f"range {number}:{stop if len(stop) <= 20 else stop[:20] + '...'}"
