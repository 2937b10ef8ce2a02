"""The relay's exchange record (relay/exchanges.N.jsonl): one JSON line per exchange, the Run's records bounded in size."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

_RECORD_FILE = re.compile(r"^exchanges\.\d+\.jsonl$")
# Room kept at the end of the bound for entries without bodies (refusals, and exchanges once the bodies no longer fit).
SUMMARY_ROOM = 1024 * 1024


class ExchangeRecord:
    """Appends entries to one attempt's record while every record of the Run stays under max_bytes together.

    An entry whose bodies would pass max_bytes - SUMMARY_ROOM is written as its summary (no request or response
    text); a summary that would pass max_bytes is not written. Not locked: its owner's lock guards it.
    """

    def __init__(self, path: Path, max_bytes: int) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.used = _records_size(path.parent)
        self.bodies_dropped = 0
        self.entries_dropped = 0

    def append(self, entry: dict[str, Any], *, durable: bool) -> None:
        """Write entry (with its "request" and "response" text when they fit); fsync when durable."""
        line = _line(entry)
        if self.used + len(line) > self.max_bytes - SUMMARY_ROOM and (entry.get("request") or entry.get("response")):
            self.bodies_dropped += 1
            line = _line({**entry, "request": "", "response": "", "omitted": "bodies: the relay record reached its bound"})
        if self.used + len(line) > self.max_bytes:
            self.entries_dropped += 1
            return
        with open(self.path, "ab") as handle:
            handle.write(line)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        self.used += len(line)

    @property
    def full(self) -> bool:
        """Whether entries no longer keep their bodies."""
        return self.bodies_dropped > 0 or self.used > self.max_bytes - SUMMARY_ROOM


def _line(entry: dict[str, Any]) -> bytes:
    # Non-ASCII text as UTF-8, not \\u escapes: a body of multi-byte characters is not recorded at several times its size.
    return (json.dumps(entry, ensure_ascii=False) + "\n").encode("utf-8")


def _records_size(folder: Path) -> int:
    """The bytes of the Run's exchange records already written (earlier agent attempts)."""
    if not folder.is_dir():
        return 0
    total = 0
    with os.scandir(folder) as entries:
        for item in entries:
            if _RECORD_FILE.match(item.name) and item.is_file(follow_symlinks=False):
                total += item.stat(follow_symlinks=False).st_size
    return total
