"""Text from outside the orchestrator (a policy's output, a Benchmark's values, an image's log, a record) made safe
to print: never read as rich markup, and every control character shown as a visible escape instead of reaching
the terminal.

`visible` is the one rule; `plain` and `markup_safe` are its two ways into rich: a `Text` (printed as it is), or
a string to put inside a markup string. Newlines and tabs are kept.
"""

from __future__ import annotations

import re

from rich.markup import escape
from rich.text import Text

# C0 but newline and tab, DEL, C1 (0x80-0x9f: 0x9b is a one-byte CSI to some terminals), and the Unicode
# bidirectional marks and overrides, which reorder what the reader sees (a reason can look like another).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """Return text with every control character but newline and tab written as a visible escape (ESC as `\\x1b`,
    U+202E as `\\u202e`); other characters are unchanged."""
    return _CONTROL.sub(_escaped, text)


def plain(text: str, style: str = "") -> Text:
    """Return text as a rich Text with style: its control characters visible, its brackets never markup."""
    return Text(visible(text), style=style)


def markup_safe(text: str) -> str:
    """Return text for a place inside a markup string: its control characters visible and its markup escaped."""
    return escape(visible(text))
