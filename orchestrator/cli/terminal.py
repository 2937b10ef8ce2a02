"""Text from outside the orchestrator (a policy's output, a Benchmark's values, an image's log, a record that someone
else may have written) made safe to print: never read as rich markup, and every control character shown as a
visible escape instead of reaching the terminal.

rich reads `[...]` as markup (a `[/]` alone ends the command with a MarkupError) and a terminal acts on control
characters (ESC sequences clear the screen, retitle the window or forge lines; C1 CSI 0x9b is ESC [ to some
terminals; bidirectional formatting characters reorder what is read). `visible` is the one rule; `plain`,
`markup_safe` and `one_line` are its ways into rich: a `Text` (printed as it is), or a string to put inside a
markup string.
"""

from __future__ import annotations

import re
from typing import Any

from rich.markup import escape
from rich.text import Text

# C0 but tab (and newline, where kept), DEL, C1 (0x80-0x9f), and the Unicode formatting characters that change how
# text reads: marks, embeddings and overrides, isolates, line and paragraph separators.
_FORMATTING = "\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_CONTROL = re.compile(f"[\x00-\x08\x0b-\x1f{_FORMATTING}]")
_CONTROL_OR_NEWLINE = re.compile(f"[\x00-\x08\x0a-\x1f{_FORMATTING}]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str, *, newlines: bool = True) -> str:
    """Return text with every control and formatting character written as a visible escape (ESC as `\\x1b`,
    U+202E as `\\u202e`); tabs kept, and newlines too unless newlines is false; other characters unchanged."""
    return (_CONTROL if newlines else _CONTROL_OR_NEWLINE).sub(_escaped, text)


def plain(text: str, style: str = "") -> Text:
    """Return text as a rich Text with style: its control characters visible, its brackets never markup."""
    return Text(visible(text), style=style)


def markup_safe(value: Any, *, newlines: bool = True) -> str:
    """Return str(value) for a place inside a markup string: its control characters visible, its markup escaped."""
    return escape(visible(str(value), newlines=newlines))


def one_line(value: Any) -> str:
    """markup_safe(value) on one line: a newline is shown as `\\x0a` too (a table cell, a name, a score)."""
    return markup_safe(value, newlines=False)
