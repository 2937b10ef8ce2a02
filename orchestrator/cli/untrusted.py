"""Text read from records (run and suite directories someone else may have written) as a terminal must show it.

rich interprets `[...]` as markup (a `[/]` alone ends the command with a MarkupError) and a terminal acts on
control characters (ESC sequences can clear the screen, retitle the window or forge lines; C1 CSI 0x9b is ESC [
on many terminals; bidirectional formatting characters reorder what is read). `shown` makes such text inert:
every control or formatting character is printed as a visible escape (\\x1b, \\u202e) and rich markup is escaped.
"""

from __future__ import annotations

import re
from typing import Any

from rich.markup import escape

# C0 controls (tab kept; newline kept only where asked), DEL, C1 controls, and the Unicode formatting characters that
# change how text reads: marks, embeddings and overrides, isolates, line and paragraph separators.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_CONTROL_OR_NEWLINE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def printable(text: str, *, newlines: bool = False) -> str:
    """text with every control and formatting character written as a visible escape (\\xNN, \\uNNNN); newlines kept
    when newlines is true."""
    pattern = _CONTROL if newlines else _CONTROL_OR_NEWLINE
    return pattern.sub(lambda match: _escape(match.group()), text)


def shown(value: Any, *, newlines: bool = False) -> str:
    """str(value) ready for rich's markup: control characters made visible (printable) and markup escaped."""
    return escape(printable(str(value), newlines=newlines))


def _escape(character: str) -> str:
    code = ord(character)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
