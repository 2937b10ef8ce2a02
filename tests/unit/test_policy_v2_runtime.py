"""The policy runtime serving an EvoPolicyGym policy/v2 Program, driven in-process over a socketpair.

What is checked here is the ABI (the context and the values a Program sees and returns, how a bad action is
classified); isolation is the docker tests' subject.
"""

from __future__ import annotations

import socket
import sys
import textwrap
import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest
from support.exact_values import assert_exactly_equal, evopolicygym_root

from epg.v1 import policy_pb2, runner_pb2
from epg_sdk.protocol import values
from epg_sdk.protocol.framing import FramedSocket, PeerClosed
from epg_sdk.runtime import policy_runtime
from epg_sdk.runtime.episode_loop import EpisodeLimits, drive_episode, start_frame

ECHO = """
from evopolicygym.policy import PolicyContext, TensorValue

class Echo:
    def __init__(self, context):
        self.context = context

    def act(self, observation):
        c = self.context
        return {
            "seen": repr(observation),
            "echo": observation,
            "context": (type(c) is PolicyContext, c.observation_space, c.action_space, dict(c.metadata),
                        dict(c.environment_parameters), c.policy_seed),
            "tensor": TensorValue(dtype="int16", shape=(2, 1), data=b"\\x01\\x00\\xff\\xff"),
        }

def make_policy(context):
    return Echo(context)
"""

OBSERVATION_SPACE = {"kind": "box", "shape": (2, 2), "bounds": [(-1.0, 1.0)]}
ACTION_SPACE = {"kind": "tuple", "parts": ({"n": 3}, {"n": 2**64 - 1})}
METADATA = {"render_fps": 4, "tags": ("grid", "stdlib"), "seed_space": 2**64 - 1}
PARAMETERS = {"size": 8, "walls": [(1, 2), (3, 4)]}
POLICY_SEED = 2**64 - 1


def v2_benchmark(**spec_fields) -> SimpleNamespace:
    spec = SimpleNamespace(id="Grid-v2", observation_space=OBSERVATION_SPACE, action_space=ACTION_SPACE, parameters=PARAMETERS,
                           program_abi="policy/v2", metadata=METADATA, horizon=3)
    for name, value in spec_fields.items():
        setattr(spec, name, value)
    return SimpleNamespace(spec=spec, validate_action=lambda action: action)


@pytest.fixture
def runtime(monkeypatch, tmp_path):
    """Start policy_runtime.serve in a thread on one end of a socketpair; yield (runner's channel, Program writer).

    serve() changes the directory, sys.path and sys.modules["policy"] of this process: all are put back afterwards.
    """
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(evopolicygym_root()))
    monkeypatch.setitem(sys.modules, "policy", None)
    runner_end, runtime_end = socket.socketpair()
    runtime_channel = FramedSocket(runtime_end)

    def serve() -> None:
        try:
            policy_runtime.serve(runtime_channel, policy_runtime.OutputTail(4096))
        except PeerClosed:  # the runner's end closed without a Stop, as main() allows
            pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    channel = FramedSocket(runner_end)

    def write(source: str) -> str:
        program = tmp_path / "program"
        program.mkdir()
        (program / "policy.py").write_text(textwrap.dedent(source))
        return str(program)

    yield channel, write
    channel.close()
    thread.join(10)
    runtime_channel.close()
    assert not thread.is_alive()


def ask(channel: FramedSocket, frame: policy_pb2.PolicyFrame) -> policy_pb2.RuntimeFrame:
    deadline = time.monotonic() + 30
    channel.send(frame, deadline)
    return channel.receive(policy_pb2.RuntimeFrame(), deadline)


def observe(observation: object) -> policy_pb2.PolicyFrame:
    frame = policy_pb2.PolicyFrame()
    values.encode_exact_into(frame.observation.value, observation)
    return frame



def test_a_policy_v2_program_gets_its_context_and_observations_exact_and_its_actions_come_back_exact(runtime):
    from evopolicygym.policy import TensorValue

    channel, write = runtime
    program = write(ECHO)
    start = start_frame(v2_benchmark(), POLICY_SEED, program, 4096)
    assert start.start.program_abi == "policy/v2"
    assert ask(channel, start).WhichOneof("kind") == "ready"

    observation = {  # keys in UTF-8 byte order: the order a Program sees them in
        "big": 2**63, "flags": TensorValue(dtype="bool", shape=(3,), data=b"\x01\x00\x01"), "grid": [(0, 1), [2.5, -0.0]],
        "name": "café", "none": None, "raw": b"\x00\xff", "small": -(2**63), "yes": True,
    }
    for step in range(2):
        answer = ask(channel, observe(observation))
        assert answer.WhichOneof("kind") == "action", answer
        action = values.decode_exact(answer.action.value)
        assert action["seen"] == repr(observation)  # what act() received, tuples, ints and TensorValue included
        assert_exactly_equal(action["echo"], observation, key_order=False)
        assert action["context"] == (True, OBSERVATION_SPACE, ACTION_SPACE, METADATA, PARAMETERS, POLICY_SEED)
        assert_exactly_equal(action["context"][1:5], (OBSERVATION_SPACE, ACTION_SPACE, METADATA, PARAMETERS), key_order=False)
        assert type(action["tensor"]) is TensorValue
        assert (action["tensor"].dtype, action["tensor"].shape, action["tensor"].data) == ("int16", (2, 1), b"\x01\x00\xff\xff")
        assert answer.action.value.map.entries["echo"].map.entries["grid"].list.items[0].WhichOneof("kind") == "tuple"
        observation["small"] += step


def test_a_policy_v2_program_without_metadata_gets_an_empty_mapping(runtime):
    channel, write = runtime
    program = write("""
        class Policy:
            def __init__(self, context):
                self.facts = (dict(context.metadata), dict(context.environment_parameters), context.policy_seed)
            def act(self, observation):
                return self.facts
        def make_policy(context):
            return Policy(context)
        """)
    assert ask(channel, start_frame(v2_benchmark(metadata={}, parameters={}), 0, program, 4096)).WhichOneof("kind") == "ready"
    answer = ask(channel, observe(None))
    assert values.decode_exact(answer.action.value) == ({}, {}, 0)


BAD_ACTIONS = {
    "numpy integer": "np.int64(1)",
    "numpy array": "np.zeros(2)",
    "numpy float in a tuple": "(1, np.float32(0.5))",
    "nan": "float('nan')",
    "infinity in a list": "[1.0, float('-inf')]",
    "int subclass": "type('MyInt', (int,), {})(3)",
    "too large an int": "2**64",
    "set": "{1, 2}",
}


@pytest.mark.parametrize("expression", BAD_ACTIONS.values(), ids=BAD_ACTIONS.keys())
def test_an_action_that_is_not_an_exact_value_is_an_encode_fault(runtime, expression):
    channel, write = runtime
    program = write(f"""
        import numpy as np
        class Policy:
            def act(self, observation):
                return {expression}
        def make_policy(context):
            return Policy()
        """)
    assert ask(channel, start_frame(v2_benchmark(), 1, program, 4096)).WhichOneof("kind") == "ready"
    answer = ask(channel, observe((1, 2)))
    assert answer.WhichOneof("kind") == "failure"
    assert answer.failure.fault == policy_pb2.POLICY_FAULT_ENCODE
    assert "ValueCodecError" in answer.failure.message


def test_a_program_raising_in_make_policy_is_a_load_fault_as_today(runtime):
    channel, write = runtime
    program = write("""
        from evopolicygym.policy import PolicyContext
        def make_policy(context):
            raise RuntimeError("no policy for " + str(context.policy_seed))
        """)
    answer = ask(channel, start_frame(v2_benchmark(), 5, program, 4096))
    assert answer.WhichOneof("kind") == "failure"
    assert answer.failure.fault == policy_pb2.POLICY_FAULT_LOAD
    assert answer.failure.message == "RuntimeError: no policy for 5"


def test_a_start_with_an_unknown_program_abi_is_refused_before_the_program_runs(runtime, tmp_path):
    channel, write = runtime
    program = write("open('ran', 'w').close()\ndef make_policy(context):\n    return None\n")
    answer = ask(channel, start_frame(v2_benchmark(program_abi="policy/v9"), 0, program, 4096))
    assert answer.WhichOneof("kind") == "failure"
    assert answer.failure.fault == policy_pb2.POLICY_FAULT_LOAD
    assert "policy/v9" in answer.failure.message
    assert not (tmp_path / "program" / "ran").exists()


def test_our_abi_still_gets_numpy_values_and_lists_for_tuples(runtime):
    channel, write = runtime
    program = write("""
        class Policy:
            def act(self, observation):
                return [type(observation).__module__, observation.dtype.name, type(self.space["shape"]).__name__, (1, 2)]
        def make_policy(context):
            p = Policy()
            p.space = context.observation_space
            return p
        """)
    ours = SimpleNamespace(spec=SimpleNamespace(id="Ours-v0", observation_space={"shape": (2,)}, action_space={"n": 2}, parameters={}))
    start = start_frame(ours, 0, program, 4096)
    assert start.start.program_abi == "" and not start.start.HasField("metadata")
    assert ask(channel, start).WhichOneof("kind") == "ready"
    frame = policy_pb2.PolicyFrame()
    values.encode_into(frame.observation.value, np.arange(2, dtype=np.float32))
    answer = ask(channel, frame)
    assert answer.action.value == values.encode(["numpy", "float32", "list", [1, 2]])


class Corridor:
    """Three cells; an exact observation per step."""

    def __init__(self):
        self.position = 0

    def reset(self):
        return self.position

    def step(self, action):
        self.position += 1
        return SimpleNamespace(observation=self.position, reward=1.0, terminated=self.position == 3, truncated=False)

    def close(self):
        pass


@pytest.mark.parametrize("expression", ["np.int64(1)", "float('nan')"])
def test_the_runner_scores_a_policy_v2_action_that_is_not_exact_as_an_invalid_action(runtime, expression):
    channel, write = runtime
    program = write(f"""
        import numpy as np
        class Policy:
            def act(self, observation):
                return 1 if observation == 0 else {expression}
        def make_policy(context):
            return Policy()
        """)
    benchmark = v2_benchmark()
    benchmark.make_environment = lambda payload: Corridor()
    record = drive_episode(benchmark, runner_pb2.EpisodeSpec(index=0), channel, EpisodeLimits(), 3, program)
    assert record.outcome == runner_pb2.RUNNER_OUTCOME_INVALID_ACTION, record
    assert record.steps == 1
    assert "ValueCodecError" in record.message
