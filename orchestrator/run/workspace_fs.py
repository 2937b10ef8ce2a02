"""The disk bound of the agent's workspace: an ext4 image of a fixed size and inode count, loop-mounted on workspace/.

Only a root Host can mount, so only a root Host bounds the workspace; a
non-root Host says so once. The image lives in the run directory beside the
workspace (never mounted into a container). ext4 reserves blocks for root:
when the agent has filled its share, the Host can still publish Feedback and
TASK.md there. When the agent phase ends, the workspace is copied out of the
image into a plain directory (regular files and directories only, nothing
followed) and the image is removed, so a finished Run reads like any other.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

from orchestrator.kernel.program import SAFE_DIR_FLAGS
from orchestrator.run.workspace import plain_entries

IMAGE_NAME = "workspace.img"
RESERVED_PERCENT = 5
COPY_MAX_DEPTH = 64


class WorkspaceFsError(Exception):
    """The bounded workspace could not be made or mounted (mkfs or mount failed); says why."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkspaceBound:
    size_bytes: int
    files: int


def can_bound() -> bool:
    return os.geteuid() == 0


def is_mounted(path: Path) -> bool:
    return os.path.ismount(path)


def mount_bounded(root: Path, workspace: Path, bound: WorkspaceBound) -> bool:
    """Make (once) and mount root/workspace.img on workspace; return False when the Host cannot (not root).

    workspace must be an empty directory or already the image's mount.
    Raises WorkspaceFsError.
    """
    if not can_bound():
        return False
    if is_mounted(workspace):
        return True
    image = root / IMAGE_NAME
    if not image.exists():
        _make_image(image, bound)
    workspace.mkdir(exist_ok=True)
    _run(["mount", "-t", "ext4", "-o", "loop,nosuid,nodev", str(image), str(workspace)], "mount the workspace image")
    os.chmod(workspace, 0o755)
    return True


def _make_image(image: Path, bound: WorkspaceBound) -> None:
    staging = image.with_name(image.name + ".new")
    staging.unlink(missing_ok=True)
    fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        os.ftruncate(fd, bound.size_bytes)
    finally:
        os.close(fd)
    _run(["mkfs.ext4", "-q", "-F", "-m", str(RESERVED_PERCENT), "-N", str(bound.files),
          "-E", "root_owner=0:0", "-L", "epg-workspace", str(staging)], "make the workspace file system")
    os.replace(staging, image)


def _run(argv: list[str], what: str) -> None:
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise WorkspaceFsError(f"cannot {what}: {exc}") from None
    if result.returncode != 0:
        raise WorkspaceFsError(f"cannot {what}: {' '.join(argv[:1])} said {result.stderr.strip() or result.returncode}")


def release(workspace: Path) -> None:
    """Unmount the workspace image if it is mounted (the image stays, for resume). Raises WorkspaceFsError."""
    if is_mounted(workspace):
        _run(["umount", str(workspace)], "unmount the workspace image")


def unmount_into_directory(root: Path, workspace: Path) -> None:
    """Copy the mounted workspace into a plain directory, unmount it and remove the image. Idempotent.

    Call only when no agent runs any more. The copy holds regular files and
    directories (mode bits kept, owner the agent's as it was); symlinks,
    FIFOs, sockets and anything deeper than COPY_MAX_DEPTH are left out.
    """
    image = root / IMAGE_NAME
    staging = root / "workspace.copy"
    if is_mounted(workspace):
        if staging.exists():
            shutil.rmtree(staging)
        source = os.open(workspace, SAFE_DIR_FLAGS)
        try:
            staging.mkdir(mode=0o755)
            target = os.open(staging, SAFE_DIR_FLAGS)
            try:
                _copy_tree(source, target, 0)
            finally:
                os.close(target)
        finally:
            os.close(source)
        _run(["umount", str(workspace)], "unmount the workspace image")
    if staging.exists():
        shutil.rmtree(workspace)  # the mount point: only what the Host made before mounting
        os.replace(staging, workspace)
    image.unlink(missing_ok=True)


def _copy_tree(source: int, target: int, depth: int) -> None:
    with os.scandir(source) as entries:
        names = [entry.name for entry in entries if entry.name != "lost+found" or depth > 0]
    for name, child, info in plain_entries(source, names):
        if stat.S_ISDIR(info.st_mode) and depth < COPY_MAX_DEPTH:
            os.mkdir(name, 0o700, dir_fd=target)
            copy = os.open(name, SAFE_DIR_FLAGS, dir_fd=target)
            try:
                _copy_tree(child, copy, depth + 1)
                _same_owner_and_mode(copy, info)
            finally:
                os.close(copy)
        elif stat.S_ISREG(info.st_mode):
            copy = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=target)
            try:
                while chunk := os.read(child, 1 << 20):
                    os.write(copy, chunk)
                _same_owner_and_mode(copy, info)
            finally:
                os.close(copy)


def _same_owner_and_mode(fd: int, info: os.stat_result) -> None:
    os.fchown(fd, info.st_uid, info.st_gid)
    os.fchmod(fd, stat.S_IMODE(info.st_mode) & 0o777)
