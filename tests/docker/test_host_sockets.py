"""Sockets the Host's sandbox leaves on the Host's file system admit no other local user.

Each Episode slot's `policy.sock` (the runner's end of the Policy ABI) takes the first connection: a local user
who reached it first would play the Episode, a held-out one included.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest

from orchestrator.kernel.program import capture_program

BASELINE = Path(__file__).resolve().parents[2] / "environments" / "cartpole" / "baseline"
pytestmark = pytest.mark.docker

OTHER_UID = 54321  # a uid nothing on this machine uses


def connect_as(uid: int, path: Path) -> str:
    """In a child that has become uid (no other groups): connect to path. Returns "connected" or the error's name."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: only system calls, then _exit
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                client.connect(str(path))
                os.write(write_end, b"connected")
            except OSError as exc:
                os.write(write_end, type(exc).__name__.encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as reader:
        said = reader.read().decode()
    os.waitpid(pid, 0)
    return said


def test_another_host_user_cannot_reach_a_prepared_policy_socket(open_sandbox):
    if os.geteuid() != 0:
        pytest.fail("this test becomes another uid: run it as root, as CI does", pytrace=False)
    with open_sandbox() as sandbox:
        root = Path(sandbox._root)
        deadline = time.monotonic() + 120
        while not (sockets := sorted(root.glob("lane*/*/policy.sock"))) and time.monotonic() < deadline:
            time.sleep(0.2)  # the pool prepares its slots in the background
        assert sockets, "no slot was prepared"
        assert connect_as(OTHER_UID, sockets[0]) == "PermissionError"
        outcome = sandbox.run_episode(sandbox.plan("train", 1, 1)[0], capture_program(BASELINE))
    assert outcome.failure is None, outcome  # the slot was left for its policy, which played the Episode

