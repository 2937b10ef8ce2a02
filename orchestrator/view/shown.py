"""Text from the records as the view shows it: bounded, and with every control, zero-width and bidirectional character
written as an escape (`\\x1b`, `\\u202e`), so what a record holds is seen and never acted upon by a terminal or a page."""

from __future__ import annotations

import re
from typing import Any

from orchestrator.records.schema import finite_number

MAX_TEXT = 4000  # characters of one text shown (a stderr tail, a traceback, a reason)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")


def visible(text: str, limit: int = MAX_TEXT) -> str:
    """text with its control, zero-width and bidirectional characters written as escapes, cut to limit characters."""
    cut = text[:limit]
    shown = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}", cut)
    return shown + (f" [{len(text) - limit} more characters]" if len(text) > limit else "")


def cleaned(value: Any, limit: int = MAX_TEXT) -> Any:
    """A JSON value with every string (keys too) made visible and bounded; non-finite numbers as None."""
    if isinstance(value, str):
        return visible(value, limit)
    if isinstance(value, bool) or value is None or isinstance(value, int):
        return value
    if isinstance(value, float):
        return finite_number(value)
    if isinstance(value, dict):
        return {visible(str(k), 200): cleaned(v, limit) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [cleaned(v, limit) for v in value]
    return visible(str(value), limit)
