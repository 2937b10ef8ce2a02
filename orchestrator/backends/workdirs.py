"""The Host's private work directories, and the removal of those whose process died.

A sandbox keeps its runner sockets, its Episodes' exchange directories and its copies of Programs in a directory of
its own under the temporary directory (a socket's path must stay short). The sandbox removes it when it closes; a
process killed outright cannot, so the directory is named for its process (`epg-<kind>-<pid>-<random>`) and is
removed, as the containers of a dead process are (`orphans`), once that pid no longer runs.

Only what this user made is touched: a directory (never a symbolic link) owned by this uid, of mode 0700 as mkdtemp
makes it, whose name says a pid of this host that is gone. A shared temporary directory is sticky, so no other user
can rename one of them away under the check, and shutil.rmtree works through directory descriptors without following
a link.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

KINDS = ("sandbox", "k8s")
_NAME = re.compile(r"epg-(?:%s)-(?P<pid>[1-9][0-9]{0,9})-[A-Za-z0-9_]{8}" % "|".join(KINDS))


def make_work_dir(kind: str, parent: Path | None = None) -> Path:
    """Create this process's private (0700) work directory of kind under parent (the temporary directory by default)."""
    assert kind in KINDS, kind
    return Path(tempfile.mkdtemp(prefix=f"epg-{kind}-{os.getpid()}-", dir=parent))


def pid_is_dead(pid: int) -> bool:
    """Return True when no process of this host has pid (a process of another user counts as alive)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # no such process; no pid is that large
        return True
    except PermissionError:
        return False
    return False


@dataclass(slots=True)
class WorkDirReport:
    removed: list[Path] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def reap_work_dirs(parent: Path | None = None) -> WorkDirReport:
    """Remove the work directories under parent (the temporary directory by default) of processes that no longer run."""
    report = WorkDirReport()
    parent = Path(parent or tempfile.gettempdir())
    try:
        entries = list(os.scandir(parent))
    except OSError as exc:
        report.errors.append(f"{parent}: {exc.strerror}")
        return report
    for entry in entries:
        found = _NAME.fullmatch(entry.name)
        if found is None or not pid_is_dead(int(found["pid"])):
            continue
        try:
            status = entry.stat(follow_symlinks=False)
        except OSError:
            continue  # gone meanwhile
        if not stat.S_ISDIR(status.st_mode) or status.st_uid != os.geteuid() or stat.S_IMODE(status.st_mode) != 0o700:
            continue
        failures = _remove_tree(entry.path)
        if failures:
            report.errors.extend(failures)
        else:
            report.removed.append(Path(entry.path))
    return report


def _remove_tree(path: str) -> list[str]:
    """Remove the tree at path; return what could not be removed."""
    failures: list[str] = []
    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=lambda _function, failed, exc: failures.append(f"{failed}: {exc}"))
    else:
        shutil.rmtree(path, onerror=lambda _function, failed, info: failures.append(f"{failed}: {info[1]}"))
    return failures
