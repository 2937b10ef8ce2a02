"""A compact text trace of one Episode, bounded in size: the head and the tail of its steps around a marker.

For an Environment's summary(): packages add one token per traced step and publish render()'s text.
"""

from __future__ import annotations

from collections.abc import Iterable

TRACE_LIMIT_CHARS = 2000
SEPARATOR = "; "


def omission_marker(omitted: int) -> str:
    """The marker that stands for `omitted` steps cut out of the middle of a trace."""
    return f"... [{omitted} steps omitted] ..."


class BoundedTrace:
    """Step tokens (short ASCII strings) of one Episode, rendered within `limit` characters.

    The whole trace when it fits; otherwise the first steps, an omission marker
    and the last steps, the tail given the larger share, since that is where an
    Episode ends.
    """

    def __init__(self, limit: int = TRACE_LIMIT_CHARS) -> None:
        if limit < 80:
            raise ValueError("a trace needs at least 80 characters")
        self._limit = limit
        self._tokens: list[str] = []

    def add(self, token: str) -> None:
        """Append one step's token (ASCII, no separator inside)."""
        self._tokens.append(token.encode("ascii", "replace").decode("ascii").replace(";", ","))

    def __len__(self) -> int:
        return len(self._tokens)

    def render(self) -> tuple[str, bool]:
        """Return (the trace text, whether steps were omitted); the text never exceeds the limit."""
        whole = SEPARATOR.join(self._tokens)
        if len(whole) <= self._limit:
            return whole, False
        budget = self._limit - len(omission_marker(len(self._tokens))) - 2 * len(SEPARATOR)
        head = self._take(self._tokens, budget // 3)
        tail = self._take(reversed(self._tokens[len(head):]), budget - _joined_length(head))[::-1]
        omitted = len(self._tokens) - len(head) - len(tail)
        parts = [*head, omission_marker(omitted), *tail]
        text = SEPARATOR.join(parts)
        if len(text) > self._limit:  # a single token longer than the whole budget
            text = text[: self._limit - 3] + "..."
        return text, True

    @staticmethod
    def _take(tokens: Iterable[str], budget: int) -> list[str]:
        taken: list[str] = []
        used = 0
        for token in tokens:
            cost = len(token) + (len(SEPARATOR) if taken else 0)
            if used + cost > budget:
                break
            taken.append(token)
            used += cost
        return taken


def _joined_length(tokens: list[str]) -> int:
    return len(SEPARATOR.join(tokens))
