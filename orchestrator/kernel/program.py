"""Programs: immutable, content-addressed snapshots of a policy directory."""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Callable

from orchestrator import ABI_VERSION

ENTRY_POINT = "policy.py"
IGNORED_DIRS = frozenset({"__pycache__"})
IGNORED_SUFFIXES = (".pyc",)


class ProgramErrorCode(StrEnum):
    NOT_FOUND = "not_found"
    NOT_A_DIRECTORY = "not_a_directory"
    MISSING_ENTRY_POINT = "missing_entry_point"
    SYMLINK = "symlink"
    SPECIAL_FILE = "special_file"
    TOO_MANY_FILES = "too_many_files"
    FILE_TOO_LARGE = "file_too_large"
    TOO_LARGE = "too_large"
    UNREADABLE = "unreadable"
    TOO_DEEP = "too_deep"
    INVALID_NAME = "invalid_name"
    CHANGED = "changed"


class ProgramError(Exception):
    """A directory cannot be captured as a Program. Nothing was spent."""

    def __init__(self, code: ProgramErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True, kw_only=True)
class ProgramLimits:
    max_files: int = 512
    max_file_bytes: int = 8 * 1024 * 1024
    max_total_bytes: int = 32 * 1024 * 1024
    max_depth: int = 32  # directory levels, the top one included
    max_entries: int = 4096  # every name seen, skipped ones included


@dataclass(frozen=True, slots=True, kw_only=True)
class ProgramFile:
    path: str  # relative, POSIX separators
    data: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class Program:
    """A captured Program. digest is "sha256:<hex>" over the canonical encoding."""

    digest: str
    files: tuple[ProgramFile, ...]

    @property
    def total_bytes(self) -> int:
        return sum(len(f.data) for f in self.files)

    def write_to(self, directory: Path) -> None:
        """Materialise the Program's files below directory (world-readable, not writable)."""
        directory.mkdir(parents=True, exist_ok=True)
        os.chmod(directory, 0o755)
        for item in self.files:
            target = directory / item.path
            target.parent.mkdir(parents=True, exist_ok=True)
            for parent in target.relative_to(directory).parents:
                os.chmod(directory / parent, 0o755)
            target.write_bytes(item.data)
            os.chmod(target, 0o644)


def program_digest(files: list[ProgramFile] | tuple[ProgramFile, ...]) -> str:
    """Return the digest of files: independent of their order, of mtimes and of the file system."""
    return files_digest(files, f"epg-program\0abi={ABI_VERSION}\0".encode())


def files_digest(files: list[ProgramFile] | tuple[ProgramFile, ...], domain: bytes) -> str:
    """Return "sha256:" and the hex SHA-256 of files under domain (what they are: a Program, a skill), each file's path
    and bytes length-prefixed: independent of their order, of mtimes and of the file system."""
    hasher = hashlib.sha256(domain)
    for item in sorted(files, key=lambda f: f.path.encode()):
        path = item.path.encode()
        hasher.update(len(path).to_bytes(8, "little"))
        hasher.update(path)
        hasher.update(len(item.data).to_bytes(8, "little"))
        hasher.update(item.data)
    return "sha256:" + hasher.hexdigest()


def capture_program(root: Path | str, limits: ProgramLimits = ProgramLimits()) -> Program:
    """Read the Program in directory root. Raises ProgramError with a code and a message naming the entry.

    Opens root without following a symlink, then reads it as capture_program_at does.
    """
    root = Path(root)
    try:
        fd = os.open(root, SAFE_DIR_FLAGS)
    except FileNotFoundError:
        raise ProgramError(ProgramErrorCode.NOT_FOUND, f"program directory {root} does not exist") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ProgramError(ProgramErrorCode.SYMLINK, f"{root} is a symbolic link") from None
        if exc.errno == errno.ENOTDIR:
            raise ProgramError(ProgramErrorCode.NOT_A_DIRECTORY, f"{root} is not a directory") from None
        raise ProgramError(ProgramErrorCode.UNREADABLE, f"cannot open {root}: {exc.strerror}") from None
    try:
        return capture_program_at(fd, limits)
    finally:
        os.close(fd)


def capture_program_at(dir_fd: int, limits: ProgramLimits = ProgramLimits()) -> Program:
    """Read the Program in the open directory dir_fd; the caller keeps and closes dir_fd.

    Safe against a writer that swaps entries while it reads: every entry is
    opened relative to its parent's descriptor with O_NOFOLLOW and O_NONBLOCK,
    its type is taken from fstat of the open descriptor (regular file or
    directory, nothing else), files are read to at most the limit plus one
    byte, and the depth is bounded. A symlink is never followed and no open
    blocks. Skips __pycache__ and .pyc files; requires policy.py at the top.
    Raises ProgramError.
    """
    walk = _Walk(limits)
    walk.directory(dir_fd, "", 0)
    if ENTRY_POINT not in walk.files:
        raise ProgramError(ProgramErrorCode.MISSING_ENTRY_POINT, f"the Program has no {ENTRY_POINT} at its top")
    files = sorted((ProgramFile(path=path, data=data) for path, data in walk.files.items()), key=lambda f: f.path.encode())
    return Program(digest=program_digest(files), files=tuple(files))


# How the Host opens what an agent may have written: never through a symlink, never blocking.
SAFE_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
SAFE_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY


class _Walk:
    """One capture: the files read so far and the counts the limits bound."""

    def __init__(self, limits: ProgramLimits) -> None:
        self.limits = limits
        self.files: dict[str, bytes] = {}
        self.entries = 0
        self.total = 0

    def directory(self, fd: int, prefix: str, depth: int) -> None:
        for name in self._names(fd, prefix):
            relative = prefix + name
            self.entries += 1
            if self.entries > self.limits.max_entries:
                raise ProgramError(ProgramErrorCode.TOO_MANY_FILES, f"more than {self.limits.max_entries} entries in all")
            if name in IGNORED_DIRS:
                continue  # never read, whatever it is
            kind = self._kind_hint(fd, name, relative)
            if kind == "dir":
                if depth + 1 >= self.limits.max_depth:
                    raise ProgramError(ProgramErrorCode.TOO_DEEP, f"{relative}/ is nested deeper than {self.limits.max_depth} levels")
                child = self._open(fd, name, relative, SAFE_DIR_FLAGS)
                try:
                    self._expect(child, stat.S_ISDIR, relative)
                    self.directory(child, relative + "/", depth + 1)
                finally:
                    os.close(child)
            elif not name.endswith(IGNORED_SUFFIXES):
                self.file(fd, name, relative)

    def file(self, parent: int, name: str, relative: str) -> None:
        limits = self.limits
        if len(self.files) >= limits.max_files:
            raise ProgramError(ProgramErrorCode.TOO_MANY_FILES, f"more than {limits.max_files} files")
        fd = self._open(parent, name, relative, SAFE_FILE_FLAGS)
        try:
            size = self._expect(fd, stat.S_ISREG, relative).st_size
            if size > limits.max_file_bytes:
                raise ProgramError(ProgramErrorCode.FILE_TOO_LARGE, f"{relative} has {size} bytes; the limit is {limits.max_file_bytes}")
            data = _read_at_most(fd, limits.max_file_bytes + 1, relative)
        finally:
            os.close(fd)
        if len(data) > limits.max_file_bytes:  # it grew after fstat
            raise ProgramError(ProgramErrorCode.FILE_TOO_LARGE, f"{relative} has more than {limits.max_file_bytes} bytes")
        self.total += len(data)
        if self.total > limits.max_total_bytes:
            raise ProgramError(ProgramErrorCode.TOO_LARGE, f"more than {limits.max_total_bytes} bytes in all")
        self.files[relative] = data

    # one entry -------------------------------------------------------------------
    def _names(self, fd: int, prefix: str) -> list[str]:
        try:
            with os.scandir(fd) as entries:
                names = []
                for entry in entries:
                    names.append(entry.name)
                    if len(names) > self.limits.max_entries:
                        raise ProgramError(ProgramErrorCode.TOO_MANY_FILES, f"more than {self.limits.max_entries} entries in {prefix or './'}")
        except OSError as exc:
            raise ProgramError(ProgramErrorCode.UNREADABLE, f"cannot list {prefix or './'}: {exc.strerror}") from None
        for name in names:
            try:
                name.encode("utf-8")
            except UnicodeEncodeError:
                shown = os.fsencode(name).decode("utf-8", "backslashreplace")
                raise ProgramError(ProgramErrorCode.INVALID_NAME, f"{prefix}{shown} is not a UTF-8 file name") from None
        return sorted(names, key=str.encode)

    @staticmethod
    def _kind_hint(parent: int, name: str, relative: str) -> str:
        """What the entry looks like now: a hint only; the open descriptor's fstat decides."""
        try:
            mode = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
        except FileNotFoundError:
            raise _changed(relative) from None
        except OSError as exc:
            raise ProgramError(ProgramErrorCode.UNREADABLE, f"cannot read {relative}: {exc.strerror}") from None
        if stat.S_ISLNK(mode):
            raise ProgramError(ProgramErrorCode.SYMLINK, f"{relative} is a symbolic link; Programs hold regular files only")
        if stat.S_ISDIR(mode):
            return "dir"
        if stat.S_ISREG(mode):
            return "file"
        raise ProgramError(ProgramErrorCode.SPECIAL_FILE, f"{relative} is not a regular file")

    @staticmethod
    def _open(parent: int, name: str, relative: str, flags: int) -> int:
        try:
            return os.open(name, flags, dir_fd=parent)
        except FileNotFoundError:
            raise _changed(relative) from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise ProgramError(ProgramErrorCode.SYMLINK, f"{relative} is a symbolic link; Programs hold regular files only") from None
            if exc.errno in (errno.ENOTDIR, errno.ENXIO, errno.ENODEV):
                raise _changed(relative) from None
            raise ProgramError(ProgramErrorCode.UNREADABLE, f"cannot read {relative}: {exc.strerror}") from None

    @staticmethod
    def _expect(fd: int, is_kind: Callable[[int], bool], relative: str) -> os.stat_result:
        info = os.fstat(fd)
        if not is_kind(info.st_mode):
            if stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode):
                raise _changed(relative)
            raise ProgramError(ProgramErrorCode.SPECIAL_FILE, f"{relative} is not a regular file")
        return info


def _changed(relative: str) -> ProgramError:
    return ProgramError(ProgramErrorCode.CHANGED, f"{relative} changed while the Program was being read; submit again")


def _read_at_most(fd: int, limit: int, relative: str) -> bytes:
    chunks, size = [], 0
    while size < limit:
        try:
            chunk = os.read(fd, min(1 << 20, limit - size))
        except OSError as exc:
            raise ProgramError(ProgramErrorCode.UNREADABLE, f"cannot read {relative}: {exc.strerror}") from None
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)
