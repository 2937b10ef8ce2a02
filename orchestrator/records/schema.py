"""Schema ids of every JSON record, and the one tolerant reader of records read back (their models: `records.events`,
`records.models`).

A record names its shape in a top-level "schema" field ("epg.<kind>/<major>");
a reader that meets a record it cannot use says so in one line, never with a traceback.
"""

from __future__ import annotations

import errno
import json
import math
import os
import stat
from pathlib import Path
from typing import Any, Final

RUN: Final = "epg.run/1"  # run.json
EVALUATION: Final = "epg.evaluation/1"  # evaluation.json of `evaluate --output`, and its --json output
FEEDBACK: Final = "epg.feedback/1"  # feedback.json, published to the agent and kept per Submission
SUBMISSION: Final = "epg.submission/1"  # submissions/<id>/record.json
EVENT: Final = "epg.event/1"  # each line of events.jsonl
VALIDATION: Final = "epg.validation/1"  # validation.json
ASSESSMENT: Final = "epg.assessment/1"  # assessment.json
SUITE: Final = "epg.suite/1"  # suite.json, a suite's plan
SUITE_EVENT: Final = "epg.suite_event/1"  # each line of a suite's suite-events.jsonl

ALL = (RUN, EVALUATION, FEEDBACK, SUBMISSION, EVENT, VALIDATION, ASSESSMENT, SUITE, SUITE_EVENT)


class RecordError(ValueError):
    """A record is missing, unreadable, not JSON, not an object or of another schema; str() is one line naming the file."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def read_record(path: Path, schema: str | None = None, *, max_bytes: int = 64 << 20) -> dict[str, Any]:
    """Return the JSON object in path. Raises RecordError.

    With schema, a record naming another schema is refused; one naming none (written
    before records carried their schema) is accepted. The file itself is opened
    without following a link and without blocking, and must be a regular file of at
    most max_bytes; a reader of a directory someone else wrote uses
    `records.safe_read.read_record`, which follows no link anywhere below its root.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except FileNotFoundError:
        raise RecordError(path, "missing") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise RecordError(path, "a symbolic link (not followed)") from None
        raise RecordError(path, f"unreadable: {exc.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise RecordError(path, "not a regular file")
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        raise RecordError(path, f"unreadable: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise RecordError(path, f"larger than {max_bytes} bytes")
    return parse_record(path, data, schema)


def parse_record(path: Path, data: bytes, schema: str | None = None) -> dict[str, Any]:
    """The JSON object in data, read from path (named in errors); schema as in read_record. Raises RecordError."""
    try:
        document = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise RecordError(path, "not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise RecordError(path, f"not JSON ({exc.lineno}:{exc.colno}: {exc.msg})") from None
    except RecursionError:
        raise RecordError(path, "nested too deeply") from None
    if not isinstance(document, dict):
        raise RecordError(path, f"not a JSON object but a {type(document).__name__}")
    found = document.get("schema")
    if schema is not None and found is not None and found != schema:
        raise RecordError(path, f"schema {found!r}, expected {schema!r}")
    return document


def finite_number(value: Any) -> float | None:
    """A number read from a record as a finite float; None for anything else (NaN, infinities, a bool, a string, an
    integer past a float's range): a record is not trusted to hold a number where one belongs."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None
