"""Acting as another local user: a forked child drops to a uid (and no groups) and reports what it could do.

The Host's sockets must admit the agent's uid (and root) and nobody else; these helpers are how a test, run as
root as CI runs it, knocks on them as someone else.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Callable

AGENT_UID = 10001  # the uid a root Host runs the agent as (run.agent_container.AGENT_UID)
OTHER_UID = 54321  # a uid nothing on this machine uses


def as_uid(uid: int, action: Callable[[], str]) -> str:
    """Run action in a child that has become uid (gid uid, no other groups); return what it returned.

    An OSError it raises is returned as "refused: NAME" (e.g. "refused: PermissionError"); any other failure of
    the child as "child failed".
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: write one answer, then _exit
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            try:
                said = action()
            except OSError as exc:
                said = f"refused: {type(exc).__name__}"
            os.write(write_end, said.encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as reader:
        said = reader.read().decode()
    os.waitpid(pid, 0)
    return said or "child failed"


def connect_as(uid: int, path: Path | str) -> str:
    """Connect to the Unix socket at path as uid: "connected", or "refused: NAME"."""

    def connect() -> str:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.settimeout(5)
            client.connect(str(path))
        return "connected"

    return as_uid(uid, connect)
