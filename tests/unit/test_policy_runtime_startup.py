"""The policy runtime's start-up, driven over its socket in a local process (no isolation claimed here)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from epg.v1 import policy_pb2
from epg_sdk.runtime.episode_loop import start_frame
from epg_sdk.testing import local_policy_runtime, local_runtime_env

OPTIONAL = ("numpy.random", "pathlib", "traceback")

REPORTER = f"""
import gc, json, sys

LOADED_AT_IMPORT = [m for m in {OPTIONAL!r} if m in sys.modules]

class Policy:
    def act(self, observation):
        return 0

def make_policy(context):
    facts = {{"loaded": LOADED_AT_IMPORT, "gc": gc.isenabled()}}
    facts["draws"] = context.rng.integers(0, 2**31, size=3).tolist()
    facts["program_dir"] = [type(context.program_dir).__name__, str(context.program_dir)]
    print("FACTS " + json.dumps(facts))
    return Policy()
"""

# All that start_frame reads of a Benchmark.
SPEC_ONLY = SimpleNamespace(
    spec=SimpleNamespace(id="Test-v0", observation_space={"kind": "box", "shape": [1]}, action_space={"kind": "discrete", "n": 2}, parameters={})
)


def serve_once(tmp_path: Path, *, start_after_s: float, seed: int = 7) -> dict:
    """Run the runtime as a program; send Start once it connected and start_after_s passed; return the facts it printed."""
    program = tmp_path / "program"
    program.mkdir()
    (program / "policy.py").write_text(textwrap.dedent(REPORTER))
    with local_policy_runtime(startup_timeout_s=60) as (channel, process):
        time.sleep(start_after_s)
        deadline = time.monotonic() + 60
        channel.send(start_frame(SPEC_ONLY, seed, str(program), 4096), deadline)
        ready = channel.receive(policy_pb2.RuntimeFrame(), deadline)
        assert ready.WhichOneof("kind") == "ready", ready
        stop = policy_pb2.PolicyFrame()
        stop.stop.reason = "episode over"
        channel.send(stop, deadline)
        goodbye = channel.receive(policy_pb2.RuntimeFrame(), deadline)
    assert process.returncode == 0
    tail = goodbye.goodbye.output_tail.decode()
    line = next(line for line in tail.splitlines() if line.startswith("FACTS "))
    return json.loads(line[len("FACTS "):]) | {"program": str(program)}


def loaded_by_interpreter_start() -> list[str]:
    """The optional modules this interpreter loads before any code runs (a .pth hook may load pathlib)."""
    code = f"import sys; print(' '.join(m for m in {OPTIONAL!r} if m in sys.modules))"
    return subprocess.run([sys.executable, "-c", code], env=local_runtime_env(), capture_output=True, text=True, check=True).stdout.split()


def test_a_runtime_whose_episode_is_waiting_loads_no_optional_module_before_the_program(tmp_path):
    facts = serve_once(tmp_path, start_after_s=0.0)
    assert facts["loaded"] == loaded_by_interpreter_start()


def test_a_runtime_that_waits_for_its_episode_loads_the_optional_modules_meanwhile(tmp_path):
    facts = serve_once(tmp_path, start_after_s=0.5)
    assert facts["loaded"] == list(OPTIONAL)


@pytest.mark.parametrize("start_after_s", [0.0, 0.5])
def test_the_program_sees_the_same_context_either_way(tmp_path, start_after_s):
    facts = serve_once(tmp_path, start_after_s=start_after_s, seed=1234)
    assert facts["gc"] is True
    assert facts["draws"] == np.random.default_rng(1234).integers(0, 2**31, size=3).tolist()
    assert facts["program_dir"] == ["PosixPath", facts["program"]]


def test_importing_the_runtime_leaves_the_garbage_collector_alone():
    code = "import gc, epg_sdk.runtime.policy_runtime; print(gc.isenabled())"
    out = subprocess.run([sys.executable, "-c", code], env=local_runtime_env(), capture_output=True, text=True, check=True).stdout
    assert out.strip() == "True"
