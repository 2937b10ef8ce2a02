"""Reading (and the few writes into) a directory someone else may have written: a run or a suite directory.

Nothing below the root is trusted. Every path below it is reached from its
parent's open descriptor with O_NOFOLLOW, so no symbolic link inside the
directory is followed (the root is the directory the user named, and is opened
as named); files are opened with O_NONBLOCK and their type is taken from fstat
of the open descriptor, so a FIFO, a socket or a device is refused without
blocking; every read is bounded by a cap for its kind of file (the constants
below) and a larger file is refused by name. A Program digest is checked
(`sha256:` and 64 lower-case hex digits) before it becomes a path. Every
refusal is a `records.schema.RecordError`: one line naming the file and why.

Writes into such a directory (a suite's logs) open their file the same way,
never through a link and never through a second name (a hard link) of a file
elsewhere, and truncate only after those checks.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from orchestrator.kernel.program import SAFE_DIR_FLAGS, SAFE_FILE_FLAGS
from orchestrator.records.schema import RecordError, parse_record

MiB = 1 << 20
MAX_RECORD_BYTES = 64 * MiB  # one JSON record: run.json, record.json, feedback.json, validation.json, assessment.json, suite.json
MAX_EVENTS_BYTES = 64 * MiB  # events.jsonl, suite-events.jsonl
MAX_TEXT_BYTES = 1 * MiB  # task.md, TASK.md, spec.yaml, suite.yaml
MAX_OUTPUT_BYTES = 16 * MiB  # a suite Run's last --json output (logs/NAME.json)
MAX_RELAY_BYTES = 1024 * MiB  # one relay/exchanges.N.jsonl, read a line at a time
MAX_RELAY_LINE_BYTES = 64 * MiB  # one exchange of it
MAX_ENTRIES = 100_000  # names listed in one directory

DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_ROOT_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NONBLOCK | os.O_CLOEXEC  # the root as the user named it
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY


def is_digest(digest: Any) -> bool:
    """True when digest is a Program digest: "sha256:" and 64 lower-case hex digits (so it can name a directory)."""
    return isinstance(digest, str) and DIGEST.match(digest) is not None


def digest_path(digest: str) -> str:
    """The store's directory of a Program, relative to the run directory ("programs/<hex>"). Raises RecordError for
    anything but a Program digest (a digest such as "sha256:../../x" never becomes a path)."""
    if not is_digest(digest):
        raise RecordError(Path("programs"), f"{digest!r} is not a Program digest (sha256: and 64 lower-case hex digits)")
    return "programs/" + digest.removeprefix("sha256:")


def parts_of(relative: str | Path) -> list[str]:
    """The components of a relative path below a root. Raises RecordError for an absolute path, "..", "." or an empty
    part (a path from a record that would leave its directory)."""
    text = str(relative)
    parts = text.split("/")
    if text.startswith("/") or any(part in ("", ".", "..") for part in parts) or "\0" in text:
        raise RecordError(Path(text), "not a plain relative path (it would leave its directory)")
    return parts


def _describe(mode: int, *, want_dir: bool = False) -> str:
    if want_dir and not stat.S_ISLNK(mode):
        return "not a directory"
    if stat.S_ISLNK(mode):
        return "a symbolic link (not followed)"
    if stat.S_ISFIFO(mode):
        return "not a regular file but a FIFO"
    if stat.S_ISSOCK(mode):
        return "not a regular file but a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "not a regular file but a device"
    if stat.S_ISDIR(mode):
        return "a directory, not a file"
    return "not a regular file"


def _open_failure(path: Path, exc: OSError, parent: int | None, name: str, *, want_dir: bool = False) -> RecordError:
    if exc.errno == errno.ENOENT:
        return RecordError(path, "missing")
    if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENXIO) and parent is not None:
        try:
            return RecordError(path, _describe(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode, want_dir=want_dir))
        except OSError:
            pass
    return RecordError(path, f"unreadable: {exc.strerror}")


def open_root(root: Path) -> int:
    """Open the directory root (as named: the user chose it); return its descriptor. Raises RecordError."""
    try:
        return os.open(root, _ROOT_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ENOTDIR:
            raise RecordError(root, "not a directory") from None
        raise _open_failure(root, exc, None, "") from None


def _walk(root: Path, parent: int, parts: list[str]) -> int:
    """Open the directory parts below the descriptor parent, one component at a time; return its descriptor."""
    current = os.dup(parent)
    walked = root
    try:
        for name in parts:
            walked = walked / name
            try:
                child = os.open(name, SAFE_DIR_FLAGS, dir_fd=current)
            except OSError as exc:
                raise _open_failure(walked, exc, current, name, want_dir=True) from None
            os.close(current)
            current = child
    except BaseException:
        os.close(current)
        raise
    return current


@contextmanager
def directory(root: Path, relative: str | Path = "") -> Iterator[int]:
    """The directory root/relative opened without following a link below root; its descriptor, closed on exit.

    Raises RecordError when it is missing, a link, not a directory or unreadable, or relative would leave root.
    """
    fd = open_root(root)
    try:
        inner = _walk(root, fd, parts_of(relative) if str(relative) not in ("", ".") else [])
    finally:
        os.close(fd)
    try:
        yield inner
    finally:
        os.close(inner)


def open_file(root: Path, relative: str | Path) -> int:
    """Open the regular file root/relative for reading as the module says; return its descriptor (the caller closes it).

    Raises RecordError (missing, a link, a FIFO or other non-regular file, unreadable).
    """
    parts = parts_of(relative)
    path = root / str(relative)
    with directory(root, "/".join(parts[:-1])) as parent:
        try:
            fd = os.open(parts[-1], SAFE_FILE_FLAGS, dir_fd=parent)
        except OSError as exc:
            raise _open_failure(path, exc, parent, parts[-1]) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise RecordError(path, _describe(mode))
    return fd


def read_bytes(root: Path, relative: str | Path, max_bytes: int) -> bytes:
    """The bytes of the regular file root/relative, at most max_bytes. Raises RecordError (also when it is larger)."""
    path = root / str(relative)
    fd = open_file(root, relative)
    try:
        size = os.fstat(fd).st_size
        if size > max_bytes:
            raise RecordError(path, f"larger than {max_bytes} bytes ({size}); not read")
        chunks, left = [], max_bytes + 1
        while left > 0 and (chunk := os.read(fd, min(left, MiB))):
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise RecordError(path, f"unreadable: {exc.strerror}") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > max_bytes:  # it grew after fstat
        raise RecordError(path, f"larger than {max_bytes} bytes; not read")
    return data


def read_text(root: Path, relative: str | Path, max_bytes: int = MAX_TEXT_BYTES) -> str:
    """The text of root/relative (undecodable bytes replaced), read as read_bytes does. Raises RecordError."""
    return read_bytes(root, relative, max_bytes).decode("utf-8", errors="replace")


def read_record(root: Path, relative: str | Path, schema: str | None = None, max_bytes: int = MAX_RECORD_BYTES) -> dict[str, Any]:
    """The JSON object in root/relative (see records.schema.read_record for schema). Raises RecordError."""
    return parse_record(root / str(relative), read_bytes(root, relative, max_bytes), schema)


def json_lines(root: Path, relative: str | Path, max_bytes: int = MAX_EVENTS_BYTES) -> list[str]:
    """The lines of root/relative (an append-only log), at most max_bytes in all. Raises RecordError."""
    return read_bytes(root, relative, max_bytes).decode("utf-8", errors="replace").splitlines()


def stream_lines(root: Path, relative: str | Path, *, max_bytes: int | None = None, max_line: int | None = None,
                 spent: list[int] | None = None) -> Iterator[str]:
    """Yield the lines of a large log one at a time: lines longer than max_line (default MAX_RELAY_LINE_BYTES) are
    skipped, and reading stops once max_bytes (default MAX_RELAY_BYTES) are read. spent[0], when given, grows by
    every byte read (skipped lines included), for a bound over several files. Raises RecordError when the file cannot
    be opened."""
    max_bytes = MAX_RELAY_BYTES if max_bytes is None else max_bytes
    max_line = MAX_RELAY_LINE_BYTES if max_line is None else max_line
    spent = [0] if spent is None else spent
    fd = open_file(root, relative)
    with os.fdopen(fd, "rb") as handle:
        total = 0
        while total < max_bytes:
            line = handle.readline(min(max_line + 1, max_bytes - total))
            if not line:
                return
            total += len(line)
            spent[0] += len(line)
            if len(line) > max_line or not line.endswith(b"\n") and total >= max_bytes:
                ended = line.endswith(b"\n")
                while not ended and total < max_bytes and (rest := handle.readline(min(MiB, max_bytes - total))):  # the rest
                    total += len(rest)
                    spent[0] += len(rest)
                    ended = rest.endswith(b"\n")
                continue
            yield line.decode("utf-8", errors="replace")


def kind(root: Path, relative: str | Path) -> str | None:
    """What root/relative is, without following a link anywhere below root: "file", "dir", "link", "other", or None
    when it is missing (or a directory on its way is missing or is not a plain directory)."""
    parts = parts_of(relative)
    try:
        with directory(root, "/".join(parts[:-1])) as parent:
            mode = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False).st_mode
    except (RecordError, OSError):
        return None
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    return "link" if stat.S_ISLNK(mode) else "other"


def names(root: Path, relative: str | Path = "", max_entries: int = MAX_ENTRIES) -> list[str]:
    """The names in the directory root/relative, sorted; [] when it is missing. Raises RecordError (a link, not a
    directory, more than max_entries names)."""
    try:
        with directory(root, relative) as fd, os.scandir(fd) as entries:
            found = []
            for entry in entries:
                found.append(entry.name)
                if len(found) > max_entries:
                    raise RecordError(root / str(relative), f"more than {max_entries} entries")
    except RecordError as exc:
        if exc.reason == "missing":
            return []
        raise
    return sorted(found)


def open_for_writing(root: Path, relative: str | Path, *, append: bool) -> BinaryIO:
    """Open root/relative to write (appending, or from empty), making it (0644) when missing; return a binary handle.

    The file is opened from its parent's descriptor with O_NOFOLLOW and O_NONBLOCK, and used only when fstat says it is
    a regular file with one name: a link, a FIFO or a hard link to a file elsewhere is refused before anything is
    truncated or written. Raises RecordError.
    """
    parts = parts_of(relative)
    path = root / str(relative)
    with directory(root, "/".join(parts[:-1])) as parent:
        try:
            fd = os.open(parts[-1], _WRITE_FLAGS | (os.O_APPEND if append else 0), 0o644, dir_fd=parent)
        except OSError as exc:
            raise _open_failure(path, exc, parent, parts[-1]) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise RecordError(path, _describe(info.st_mode))
        if info.st_nlink != 1:
            raise RecordError(path, f"has {info.st_nlink} names (a hard link); not written")
        if not append:
            os.ftruncate(fd, 0)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "ab" if append else "wb")
