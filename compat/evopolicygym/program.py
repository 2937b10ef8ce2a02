"""Program: a detached, immutable, bounded snapshot of a policy/v2 Program directory (entry point `policy.py:make_policy`).

Capture never follows a symbolic link: a directory holding one (pointing anywhere), a FIFO, a socket or a device is
refused, every file is opened with O_NOFOLLOW and read with a byte bound, and a file or listing that changes while it is
read is refused. `.git` and `__pycache__` directories and `*.pyc` files are left out. The snapshot keeps no path.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, NoReturn

from .errors import ProgramChangedError, ProgramLimitError, ProgramSourceError
from .policy import POLICY_ABI_VERSION

ENTRYPOINT = "policy.py:make_policy"
_SKIPPED_DIRECTORIES = frozenset({".git", "__pycache__"})
_DIGEST_DOMAIN = b"evopolicygym/program/v1\x00"
_READ_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class ProgramLimits:
    """Bounds on a captured Program: number of files, bytes of one file, bytes in all.

    Raises ValueError for a bound that is not a positive int, or a file bound above the total.
    """

    max_files: int = 1000
    max_total_bytes: int = 64 * 1024 * 1024
    max_file_bytes: int = 16 * 1024 * 1024

    def __post_init__(self) -> None:
        for name in ("max_files", "max_total_bytes", "max_file_bytes"):
            bound = getattr(self, name)
            if type(bound) is not int or bound < 1:
                raise ValueError(f"{name} must be a positive integer")
        if self.max_file_bytes > self.max_total_bytes:
            raise ValueError("max_file_bytes cannot exceed max_total_bytes")


class Program:
    """An immutable snapshot of a Program's files, identified by a SHA-256 digest over its entry point, ABI, paths and bytes.

    Made only by Program.from_directory(); the constructor raises TypeError.
    """

    __slots__ = ("_contents", "_digest")
    _contents: MappingProxyType[str, bytes]
    _digest: str

    def __init__(self) -> None:
        raise TypeError("a Program is made with Program.from_directory(path)")

    @classmethod
    def from_directory(cls, path: str | os.PathLike[str], *, limits: ProgramLimits | None = None) -> Program:
        """Return a snapshot of the directory at path.

        Raises TypeError for a path or limits of the wrong type; ProgramSourceError when path is not a real directory,
        cannot be read, has no top-level policy.py, or holds a symbolic link, a special file or a name that is not
        canonical UTF-8; ProgramLimitError when a ProgramLimits bound is exceeded; ProgramChangedError when the
        directory changes while it is read.
        """
        bounds = ProgramLimits() if limits is None else limits
        if type(bounds) is not ProgramLimits:
            raise TypeError("limits must be ProgramLimits or None")
        try:
            root = Path(os.fspath(path))
        except TypeError:
            raise TypeError("path must be a str or path-like") from None
        try:
            root_mode = os.lstat(root).st_mode
        except OSError:
            raise ProgramSourceError("the Program directory cannot be inspected") from None
        if not stat.S_ISDIR(root_mode):
            raise ProgramSourceError("the Program source must be a real directory, not a symbolic link or a file")

        first = _capture(root, bounds, read=True)
        if "policy.py" not in first:
            raise ProgramSourceError("the Program must contain policy.py")
        if sorted(_capture(root, bounds, read=False)) != sorted(first):
            raise ProgramChangedError("the Program directory changed while it was captured")
        contents = {relative: data for relative, data in first.items() if data is not None}
        return cls._of(contents)

    @classmethod
    def _of(cls, contents: dict[str, bytes]) -> Program:
        ordered = {name: contents[name] for name in sorted(contents, key=lambda name: name.encode())}
        snapshot = object.__new__(cls)
        object.__setattr__(snapshot, "_contents", MappingProxyType(ordered))
        object.__setattr__(snapshot, "_digest", _digest(ordered))
        return snapshot

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError("a Program is immutable")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError("a Program is immutable")

    def __eq__(self, other: object) -> bool:
        if type(other) is not Program:
            return NotImplemented
        return self._digest == other._digest

    def __hash__(self) -> int:
        return hash(self._digest)

    def __reduce__(self) -> tuple[Any, ...]:
        return (Program._of, (dict(self._contents),))

    @property
    def digest(self) -> str:
        """`sha256:<hex>` over the entry point, the Policy ABI version and every path and its bytes."""
        return self._digest

    @property
    def entrypoint(self) -> str:
        """Always `policy.py:make_policy`."""
        return ENTRYPOINT

    @property
    def policy_abi(self) -> str:
        """Always `policy/v2`."""
        return POLICY_ABI_VERSION

    @property
    def files(self) -> tuple[str, ...]:
        """Relative POSIX paths of the files, sorted by their UTF-8 bytes."""
        return tuple(self._contents)

    @property
    def file_count(self) -> int:
        """The number of files."""
        return len(self._contents)

    @property
    def total_bytes(self) -> int:
        """The number of bytes in all files."""
        return sum(len(data) for data in self._contents.values())

    def read_bytes(self, path: str, /) -> bytes:
        """Return the bytes of the file at a relative POSIX path; raises TypeError for a non-str path, KeyError for an unknown one."""
        if type(path) is not str:
            raise TypeError("path must be text")
        return self._contents[path]

    def write_to(self, directory: str | os.PathLike[str]) -> None:
        """Write the files into a new directory (made atomically by renaming a sibling temporary directory).

        Raises FileExistsError when directory exists (or is a dangling link), FileNotFoundError when its parent is not a directory.
        """
        target = Path(os.fspath(directory))
        if os.path.lexists(target):
            raise FileExistsError(str(target))
        if not target.parent.is_dir():
            raise FileNotFoundError(str(target.parent))
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        try:
            for relative, data in self._contents.items():
                destination = staging.joinpath(*relative.split("/"))
                destination.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                with open(destination, "xb") as stream:
                    stream.write(data)
            os.rename(staging, target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise

    def __repr__(self) -> str:
        return f"Program(digest={self._digest!r}, file_count={self.file_count}, total_bytes={self.total_bytes})"


_DIRECTORY_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
_FILE_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)


def _capture(root: Path, bounds: ProgramLimits, *, read: bool) -> dict[str, bytes | None]:
    """Every regular file under root by relative path, with its bytes when read (None otherwise).

    Each directory is opened relative to its parent's descriptor without following a link, so a directory swapped for
    a link while the walk runs is refused rather than followed. Raises ProgramSourceError for what a Program cannot
    hold, ProgramLimitError past a bound, ProgramChangedError for a change seen during the walk.
    """
    try:
        root_descriptor = os.open(root, _DIRECTORY_FLAGS)
    except OSError:
        raise ProgramSourceError("the Program directory cannot be opened") from None
    found: dict[str, bytes | None] = {}
    total = 0
    pending: list[tuple[int, str]] = [(root_descriptor, "")]
    try:
        while pending:
            descriptor, prefix = pending[-1]
            try:
                with os.scandir(descriptor) as entries:
                    listed = list(entries)
            except OSError:
                raise ProgramSourceError("a Program directory cannot be read") from None
            for entry in listed:
                name = _canonical_name(entry.name)
                relative = prefix + name
                if entry.is_symlink():
                    raise ProgramSourceError(f"the Program cannot contain a symbolic link: {relative}")
                if entry.is_dir(follow_symlinks=False):
                    if name not in _SKIPPED_DIRECTORIES:
                        try:
                            pending.append((os.open(name, _DIRECTORY_FLAGS, dir_fd=descriptor), relative + "/"))
                        except OSError:
                            raise ProgramChangedError(f"a Program directory changed while it was captured: {relative}") from None
                elif not entry.is_file(follow_symlinks=False):
                    raise ProgramSourceError(f"the Program cannot contain a special file: {relative}")
                elif not name.endswith(".pyc"):
                    if len(found) == bounds.max_files:
                        raise ProgramLimitError(f"the Program holds more than {bounds.max_files} files")
                    data = _read_bounded(descriptor, name, relative, bounds.max_file_bytes) if read else None
                    total += 0 if data is None else len(data)
                    if total > bounds.max_total_bytes:
                        raise ProgramLimitError(f"the Program holds more than {bounds.max_total_bytes} bytes")
                    found[relative] = data
            os.close(descriptor)
            pending.remove((descriptor, prefix))
    finally:
        for descriptor, _ in pending:
            os.close(descriptor)
    return found


def _canonical_name(name: str) -> str:
    if name in ("", ".", "..") or "/" in name or "\\" in name or unicodedata.normalize("NFC", name) != name:
        raise ProgramSourceError(f"the Program contains a non-canonical name: {name!r}")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise ProgramSourceError("the Program contains a name that is not UTF-8") from None
    return name


def _read_bounded(directory: int, name: str, relative: str, max_bytes: int) -> bytes:
    """The bytes of one regular file of a directory, opened without following a link, refused when it changes or exceeds max_bytes."""
    try:
        descriptor = os.open(name, _FILE_FLAGS, dir_fd=directory)
    except OSError:
        raise ProgramChangedError(f"a Program file changed while it was captured: {relative}") from None
    try:
        before = os.fstat(descriptor)
        if not stat.S_ISREG(before.st_mode):
            raise ProgramSourceError(f"the Program can contain only regular files: {relative}")
        if before.st_size > max_bytes:
            raise ProgramLimitError(f"a Program file holds more than {max_bytes} bytes: {relative}")
        chunks: list[bytes] = []
        left = max_bytes + 1
        while left > 0:
            chunk = os.read(descriptor, min(_READ_CHUNK, left))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > max_bytes:
            raise ProgramLimitError(f"a Program file holds more than {max_bytes} bytes: {relative}")
        after = os.fstat(descriptor)
        try:
            now = os.stat(name, dir_fd=directory, follow_symlinks=False)
        except OSError:
            raise ProgramChangedError(f"a Program file changed while it was captured: {relative}") from None
        if len({_identity(before), _identity(after), _identity(now)}) != 1 or len(data) != before.st_size:
            raise ProgramChangedError(f"a Program file changed while it was captured: {relative}")
        return data
    finally:
        os.close(descriptor)


def _identity(status: os.stat_result) -> tuple[int, int, int, int]:
    return (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)


def _digest(contents: dict[str, bytes]) -> str:
    """SHA-256 over a domain tag, then length-prefixed (8-byte big-endian) fields: entry point, ABI, file count, each path and its bytes."""
    fields: list[bytes] = [ENTRYPOINT.encode("ascii"), POLICY_ABI_VERSION.encode("ascii")]
    hasher = hashlib.sha256(_DIGEST_DOMAIN)
    for value in fields:
        hasher.update(len(value).to_bytes(8, "big") + value)
    hasher.update(len(contents).to_bytes(8, "big"))
    for relative, data in contents.items():
        encoded = relative.encode("utf-8")
        hasher.update(len(encoded).to_bytes(8, "big") + encoded)
        hasher.update(len(data).to_bytes(8, "big"))
        hasher.update(data)
    return "sha256:" + hasher.hexdigest()


__all__ = ["Program", "ProgramLimits"]
