"""Sockets the Host's sandbox leaves on the Host's file system admit no other local user.

Each Episode slot's `policy.sock` (the runner's end of the Policy ABI) takes the first connection: a local user
who reached it first would play the Episode, a held-out one included.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from support.other_uid import OTHER_UID, connect_as

from orchestrator.kernel.program import capture_program

BASELINE = Path(__file__).resolve().parents[2] / "environments" / "cartpole" / "baseline"
pytestmark = pytest.mark.docker

def test_another_host_user_cannot_reach_a_prepared_policy_socket(open_sandbox):
    if os.geteuid() != 0:
        pytest.fail("this test becomes another uid: run it as root, as CI does", pytrace=False)
    with open_sandbox() as sandbox:
        root = Path(sandbox._root)
        deadline = time.monotonic() + 120
        while not (sockets := sorted(root.glob("lane*/*/policy.sock"))) and time.monotonic() < deadline:
            time.sleep(0.2)  # the pool prepares its slots in the background
        assert sockets, "no slot was prepared"
        assert connect_as(OTHER_UID, sockets[0]) == "refused: PermissionError"
        outcome = sandbox.run_episode(sandbox.plan("train", 1, 1)[0], capture_program(BASELINE))
    assert outcome.failure is None, outcome  # the slot was left for its policy, which played the Episode

