"""Agent skills (`agent.skills`): SKILL.md bundles on the Host, copied at Run start into a content-addressed store.

Each directory the spec names is read as Programs are (`kernel.program`'s reader: no symlink followed, only
regular files and directories, bounded in files, bytes and depth; `__pycache__` and `.pyc` left out), must hold
`SKILL.md` at its top, and is stored once under `skills/<hex digest>/` of the run directory. The store is mounted
read-only into the agent container (`run.agent_container`) at `/epg/skills/<name>`, the name being the
directory's own; the task text lists them and run.json records each name and digest.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from orchestrator.kernel.program import SAFE_DIR_FLAGS, ProgramError, ProgramFile, ProgramLimits, _Walk, files_digest

SKILL_FILE = "SKILL.md"
MOUNT_ROOT = "/epg/skills"
# As EvoPolicyGym 0.3 bounds a skill: 512 files, 16 MiB a file, 64 MiB in all; 16 directory levels.
SKILL_LIMITS = ProgramLimits(max_files=512, max_file_bytes=16 * 1024 * 1024, max_total_bytes=64 * 1024 * 1024, max_depth=16)
MAX_SKILLS = 16
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class SkillError(Exception):
    """A skill directory that cannot be stored: its path and why."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredSkill:
    name: str  # the directory's name: where the agent finds it (MOUNT_ROOT/name)
    digest: str  # "sha256:<hex>" over its files
    files: int
    bytes: int

    @property
    def store_name(self) -> str:
        """Its directory in the store: the digest's hex."""
        return self.digest.removeprefix("sha256:")

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "digest": self.digest, "files": self.files, "bytes": self.bytes}


def skill_digest(files: list[ProgramFile] | tuple[ProgramFile, ...]) -> str:
    """The digest of a skill's files: independent of their order, mtimes and file system; another domain than Programs'."""
    return files_digest(files, b"epg-skill\0")


def read_skill(directory: Path, limits: ProgramLimits = SKILL_LIMITS) -> tuple[str, tuple[ProgramFile, ...]]:
    """Read one skill directory; return its digest and files (sorted). Raises SkillError naming directory and the cause."""
    try:
        fd = os.open(directory, SAFE_DIR_FLAGS)
    except OSError as exc:
        raise SkillError(f"{directory}: cannot open it as a directory (a symbolic link is not followed): {exc.strerror}") from None
    try:
        walk = _Walk(limits)
        walk.directory(fd, "", 0)
    except ProgramError as exc:
        raise SkillError(f"{directory}: {exc.message}") from None
    finally:
        os.close(fd)
    if SKILL_FILE not in walk.files:
        raise SkillError(f"{directory}: has no {SKILL_FILE} at its top")
    files = tuple(sorted((ProgramFile(path=path, data=data) for path, data in walk.files.items()), key=lambda f: f.path.encode()))
    return skill_digest(files), files


def store_skills(paths: list[str], base: Path, store: Path) -> list[StoredSkill]:
    """Read each skill directory (relative to base) and store it under store/<hex digest>/; return them in order.

    A skill already in the store is not written again. Files are 0644 and directories 0755 (the agent reads them
    as another uid, through a read-only mount). Raises SkillError for a directory that cannot be read, has no
    SKILL.md, exceeds a limit, or has the name of an earlier one.
    """
    stored: list[StoredSkill] = []
    for raw in paths:
        directory = base / raw
        name = directory.name if directory.name not in ("", ".", "..") else Path(os.path.normpath(directory)).name
        if _NAME.fullmatch(name) is None:
            raise SkillError(f"{raw}: a skill directory's name must be 1 to 64 letters, digits, '.', '_' or '-'")
        if any(skill.name == name for skill in stored):
            raise SkillError(f"{raw}: another skill is named {name!r} already")
        digest, files = read_skill(directory)
        skill = StoredSkill(name=name, digest=digest, files=len(files), bytes=sum(len(f.data) for f in files))
        _write(store / skill.store_name, files)
        stored.append(skill)
    return stored


def _write(target: Path, files: tuple[ProgramFile, ...]) -> None:
    if target.is_dir():
        return  # content-addressed: the same files
    staging = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    staging.mkdir(mode=0o755, parents=True)
    os.chmod(staging.parent, 0o755)
    for item in files:
        path = staging / item.path
        path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        with open(path, "xb") as stream:
            stream.write(item.data)
        os.chmod(path, 0o644)
    for directory, _, _ in os.walk(staging):
        os.chmod(directory, 0o755)
    os.replace(staging, target)
