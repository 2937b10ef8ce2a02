"""Atomic, durable file writes with explicit permission bits, whatever the umask.

Two kinds of record: Host-private ones (the default, `PRIVATE_FILE`) and the
ones the agent reads from its workspace (`PUBLIC_FILE` in `PUBLIC_DIRECTORY`
directories). The Host often runs as root and the agent as another user, so
the bits are set on the descriptor and on each directory explicitly: a root
umask of 077 must not lock the agent out, nor 000 let it write.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

PRIVATE_FILE = 0o600
PUBLIC_FILE = 0o644
PUBLIC_DIRECTORY = 0o755
PRIVATE_DIRECTORY = 0o700


def write_bytes(path: Path, data: bytes, *, mode: int = PRIVATE_FILE) -> None:
    """Write data to path atomically with permission bits mode (temp file, fchmod, fsync, rename, fsync of the directory).

    Readers see the old file or the complete new one, never a part; on any
    failure the temp file is removed and path is left as it was. Missing parent
    directories are made with the umask's bits: a caller that publishes makes
    them first with make_directory. Raises OSError.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), mode)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    _fsync_directory(path.parent)


def write_json(path: Path, value: Any, *, mode: int = PRIVATE_FILE) -> None:
    """Write value as indented JSON to path atomically with permission bits mode. Raises OSError, TypeError."""
    write_bytes(path, (json.dumps(value, indent=2, sort_keys=False) + "\n").encode(), mode=mode)


def make_directory(path: Path, mode: int) -> None:
    """Make path and its missing parents; set mode on path and on every directory made, whatever the umask.

    Existing ancestors are left as they are. The bits are set through a
    descriptor opened with O_NOFOLLOW, so a symlink at path is refused, never
    followed. Raises OSError (NotADirectoryError when path is a file, OSError
    with ELOOP when it is a symlink).
    """
    made = []
    current = path
    while not os.path.lexists(current):
        made.append(current)
        current = current.parent
    path.mkdir(parents=True, exist_ok=True)
    for directory in [path, *made[1:]]:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            os.fchmod(fd, mode)
        finally:
            os.close(fd)


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
