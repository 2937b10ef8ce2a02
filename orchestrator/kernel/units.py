"""Sizes written by people ("512m", "2g") as byte counts."""

from __future__ import annotations

import re

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmg]?)i?b?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def parse_bytes(text: str) -> int:
    """Return the byte count of a size such as 512m, 1g, 1.5GiB or 1048576. Raises ValueError."""
    match = _SIZE.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a size like 512m or 2g")
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])
