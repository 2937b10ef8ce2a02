"""Programs: immutable, content-addressed snapshots of a policy directory."""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path, PurePosixPath

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
    hasher = hashlib.sha256()
    hasher.update(f"epg-program\0abi={ABI_VERSION}\0".encode())
    for item in sorted(files, key=lambda f: f.path.encode()):
        path = item.path.encode()
        hasher.update(len(path).to_bytes(8, "little"))
        hasher.update(path)
        hasher.update(len(item.data).to_bytes(8, "little"))
        hasher.update(item.data)
    return "sha256:" + hasher.hexdigest()


def capture_program(root: Path | str, limits: ProgramLimits = ProgramLimits()) -> Program:
    """Read the Program in directory root. Raises ProgramError with a code and a readable message.

    Rejects symlinks and special files; skips __pycache__ and .pyc files;
    requires policy.py at the top.
    """
    root = Path(root)
    if not root.exists():
        raise ProgramError(ProgramErrorCode.NOT_FOUND, f"program directory {root} does not exist")
    if not root.is_dir():
        raise ProgramError(ProgramErrorCode.NOT_A_DIRECTORY, f"{root} is not a directory")
    if not (root / ENTRY_POINT).is_file():
        raise ProgramError(ProgramErrorCode.MISSING_ENTRY_POINT, f"{root} has no {ENTRY_POINT}")
    files: list[ProgramFile] = []
    total = 0
    for path in _walk(root):
        relative = PurePosixPath(path.relative_to(root).as_posix())
        mode = path.lstat().st_mode
        if stat.S_ISLNK(mode):
            raise ProgramError(ProgramErrorCode.SYMLINK, f"{relative} is a symbolic link; Programs hold regular files only")
        if not stat.S_ISREG(mode):
            raise ProgramError(ProgramErrorCode.SPECIAL_FILE, f"{relative} is not a regular file")
        size = path.lstat().st_size
        if size > limits.max_file_bytes:
            raise ProgramError(ProgramErrorCode.FILE_TOO_LARGE, f"{relative} has {size} bytes; the limit is {limits.max_file_bytes}")
        if len(files) >= limits.max_files:
            raise ProgramError(ProgramErrorCode.TOO_MANY_FILES, f"more than {limits.max_files} files")
        total += size
        if total > limits.max_total_bytes:
            raise ProgramError(ProgramErrorCode.TOO_LARGE, f"more than {limits.max_total_bytes} bytes in all")
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ProgramError(ProgramErrorCode.UNREADABLE, f"cannot read {relative}: {exc.strerror}") from exc
        files.append(ProgramFile(path=str(relative), data=data))
    files.sort(key=lambda f: f.path.encode())
    return Program(digest=program_digest(files), files=tuple(files))


def _walk(root: Path):
    for entry in sorted(os.scandir(root), key=lambda e: e.name):
        path = Path(entry.path)
        if entry.is_dir(follow_symlinks=False):
            if entry.name in IGNORED_DIRS:
                continue
            yield from _walk(path)
        elif not entry.name.endswith(IGNORED_SUFFIXES):
            yield path
