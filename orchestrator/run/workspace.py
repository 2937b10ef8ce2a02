"""Every touch of the Host on the agent's workspace: Program capture as the agent's uid, and the hand-over.

The agent writes program/ and analysis/ while the Host, usually root, reads
and chowns them. Nothing here resolves a path below those two directories:
each entry is reached from its parent's open descriptor with O_NOFOLLOW, its
type is taken from fstat of the open descriptor, and depth is bounded. As
defence in depth, a root Host captures the Program in a forked child that has
dropped to the agent's uid and groups, so a mistake here can still read only
what the agent itself could read.
"""

from __future__ import annotations

import dataclasses
import json
import os
import stat
import struct
import subprocess
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from orchestrator.kernel.program import (
    SAFE_DIR_FLAGS,
    SAFE_FILE_FLAGS,
    Program,
    ProgramError,
    ProgramErrorCode,
    ProgramFile,
    ProgramLimits,
    capture_program_at,
    program_digest,
)

CAPTURE_DEADLINE_S = 60.0
HAND_OVER_MAX_DEPTH = 64  # deeper than any Program; what lies deeper the agent made itself
_HEADER = struct.Struct("<IQ")


class CaptureUnavailable(Exception):
    """The Host cannot capture as the agent's uid here (a set-up fault, never the agent's)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentIdentity:
    uid: int
    gid: int


def open_agent_directory(workspace: Path, name: str) -> int:
    """Open workspace/name (a directory the agent may write) without following a symlink; return its descriptor.

    workspace itself belongs to the Host. Raises ProgramError when name is
    missing, a symlink or not a directory.
    """
    parent = os.open(workspace, SAFE_DIR_FLAGS)
    try:
        return os.open(name, SAFE_DIR_FLAGS, dir_fd=parent)
    except FileNotFoundError:
        raise ProgramError(ProgramErrorCode.NOT_FOUND, f"{name}/ does not exist in the workspace") from None
    except OSError as exc:
        raise ProgramError(ProgramErrorCode.NOT_A_DIRECTORY, f"{name}/ is not a plain directory: {exc.strerror}") from None
    finally:
        os.close(parent)


def capture_workspace_program(workspace: Path, agent: AgentIdentity | None, limits: ProgramLimits = ProgramLimits()) -> Program:
    """Capture workspace/program; as agent's uid when agent is given and the Host is root. Raises ProgramError."""
    fd = open_agent_directory(workspace, "program")
    try:
        if agent is None or os.geteuid() != 0:
            return capture_program_at(fd, limits)
        return _capture_in_child(fd, agent, limits)
    finally:
        os.close(fd)


# the child that captures as the agent ----------------------------------------------
# A fresh interpreter (no threads, nothing inherited but the descriptor) starts
# as root, so it can load this code wherever it is installed, drops to the
# agent's uid and no supplementary groups before it touches the descriptor,
# then writes the Program to stdout.
def _capture_in_child(fd: int, agent: AgentIdentity, limits: ProgramLimits) -> Program:
    argv = [sys.executable, "-I", "-m", "orchestrator.run.workspace", str(fd), str(agent.uid), str(agent.gid),
            json.dumps(dataclasses.asdict(limits))]
    try:
        child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 pass_fds=(fd,), env={"PATH": "/usr/bin:/bin"}, cwd="/")
    except OSError as exc:
        raise CaptureUnavailable(f"cannot start the capture: {exc}") from None
    try:
        payload, errors = child.communicate(timeout=CAPTURE_DEADLINE_S)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        raise ProgramError(ProgramErrorCode.UNREADABLE, f"reading the Program took longer than {CAPTURE_DEADLINE_S:.0f} s") from None
    if child.returncode != 0 or payload[:2] not in (b"ok", b"er"):
        raise CaptureUnavailable(f"the capture as uid {agent.uid} failed (exit {child.returncode}): {errors.decode(errors='replace')[-2000:]}")
    return _decode(payload, limits)


def _child_main(argv: list[str]) -> int:  # pragma: no cover - runs as the agent, checked through its answer
    fd, uid, gid, limits = int(argv[0]), int(argv[1]), int(argv[2]), ProgramLimits(**json.loads(argv[3]))
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.getresuid() != (uid, uid, uid) or os.getgroups():
        return 3
    try:
        program = capture_program_at(fd, limits)
    except ProgramError as exc:
        sys.stdout.buffer.write(b"er" + json.dumps({"code": exc.code.value, "message": exc.message}).encode())
        return 0
    out = sys.stdout.buffer
    out.write(b"ok")
    for item in program.files:
        path = item.path.encode()
        out.write(_HEADER.pack(len(path), len(item.data)))
        out.write(path)
        out.write(item.data)
    out.flush()
    return 0


def _decode(payload: bytes, limits: ProgramLimits) -> Program:
    kind, body = payload[:2], memoryview(payload)[2:]
    if kind == b"er":
        error = json.loads(bytes(body))
        raise ProgramError(ProgramErrorCode(error["code"]), error["message"])
    if kind != b"ok":
        raise RuntimeError("the capture child ended without an answer")
    files, offset = [], 0
    while offset < len(body):
        path_len, data_len = _HEADER.unpack_from(body, offset)
        offset += _HEADER.size
        path = bytes(body[offset:offset + path_len]).decode()
        offset += path_len
        files.append(ProgramFile(path=path, data=bytes(body[offset:offset + data_len])))
        offset += data_len
    if len(files) > limits.max_files:
        raise RuntimeError("the capture child answered more files than the limit")
    return Program(digest=program_digest(files), files=tuple(files))


# the hand-over -----------------------------------------------------------------------
def hand_over(workspace: Path, names: tuple[str, ...], agent: AgentIdentity) -> int:
    """Give workspace/<name> trees to the agent (root Host only); return how many entries changed owner.

    Only directories and singly-linked regular files not yet the agent's are
    changed, each through its own open descriptor (fchown), so a planted
    symlink, a hard link to a Host file, a swapped directory or a FIFO never
    makes the Host chown anything else. Entries that vanish are skipped;
    nothing deeper than HAND_OVER_MAX_DEPTH is visited (the Host writes no
    such entry, so whatever lies there the agent made and owns).
    """
    changed = 0
    for name in names:
        try:
            fd = open_agent_directory(workspace, name)
        except ProgramError:
            continue
        try:
            changed += _hand_over_tree(fd, agent, 0)
        finally:
            os.close(fd)
    return changed


def _hand_over_tree(fd: int, agent: AgentIdentity, depth: int) -> int:
    changed = _claim(fd, agent)
    if depth >= HAND_OVER_MAX_DEPTH:
        return changed
    try:
        with os.scandir(fd) as entries:
            names = [entry.name for entry in entries]
    except OSError:
        return changed
    for _name, child, info in plain_entries(fd, names):
        if stat.S_ISDIR(info.st_mode):
            changed += _hand_over_tree(child, agent, depth + 1)
        else:
            changed += _claim(child, agent)
    return changed


def plain_entries(parent: int, names: Iterable[str]) -> Iterator[tuple[str, int, os.stat_result]]:
    """Yield (name, descriptor, fstat of it) for each of names below parent that is a directory or a regular file.

    Each is opened without following a link and without blocking; the
    descriptor is closed when the next entry is asked for. Symlinks, FIFOs,
    sockets and entries that vanish are skipped, never opened. The caller
    decides by the fstat result, not by the name: an entry swapped after the
    look may still be something else.
    """
    for name in names:
        try:
            mode = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
            if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
                continue
            child = os.open(name, SAFE_DIR_FLAGS if stat.S_ISDIR(mode) else SAFE_FILE_FLAGS, dir_fd=parent)
        except OSError:
            continue
        try:
            yield name, child, os.fstat(child)
        finally:
            os.close(child)


def _claim(fd: int, agent: AgentIdentity) -> int:
    info = os.fstat(fd)
    if (info.st_uid, info.st_gid) == (agent.uid, agent.gid):
        return 0
    if stat.S_ISREG(info.st_mode) and info.st_nlink != 1:
        return 0  # a hard link may be a Host file's second name
    if not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
        return 0
    os.fchown(fd, agent.uid, agent.gid)
    return 1


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1:]))
