"""Parallel Episodes and pre-started, single-use policy containers."""

from __future__ import annotations

import threading
import time

from programs import STEADY
from support.engine_events import ContainerCreations

from orchestrator.backends.labels import ROLE, SANDBOX, selector
from orchestrator.backends.settings import SandboxTuning
from orchestrator.kernel.evaluation import evaluate_program, evaluate_programs
from orchestrator.kernel.program import capture_program

RANDOM_POLICY = '''
class Policy:
    def __init__(self, rng):
        self.rng = rng
    def act(self, observation):
        return int(self.rng.integers(0, 2)) if observation[2] < 0.1 else 1

def make_policy(context):
    return Policy(context.rng)
'''

MARKER = '''
import os
class Policy:
    def act(self, observation):
        return 0
def make_policy(context):
    seen = os.path.exists("/tmp/marker")
    open("/tmp/marker", "w").write("used")
    print("SEEN" if seen else "FRESH", open("/proc/self/cgroup").read().split("/")[-1].strip())
    if seen:
        raise RuntimeError("this container served an earlier Episode")
    return Policy()
'''


def _table(evaluation):
    return [(o.index, o.status, o.failure, o.steps, o.reward) for o in evaluation.feedback.episodes]


def test_concurrency_does_not_change_results(open_sandbox, write_program):
    program = capture_program(write_program(RANDOM_POLICY))
    with open_sandbox(tuning=SandboxTuning(concurrency=1, pool_size=0)) as sandbox:
        serial = evaluate_program(sandbox, program, split="train", seed=11, episodes=8)
    with open_sandbox(tuning=SandboxTuning(concurrency=4, pool_size=8)) as sandbox:
        parallel = evaluate_program(sandbox, program, split="train", seed=11, episodes=8)
    assert _table(serial) == _table(parallel)
    assert [o.index for o in parallel.feedback.episodes] == list(range(8))
    assert serial.feedback.score == parallel.feedback.score
    assert serial.feedback.values == parallel.feedback.values


def test_no_pooled_container_serves_two_episodes(open_sandbox, write_program, engine):
    program = capture_program(write_program(MARKER))
    with open_sandbox(tuning=SandboxTuning(concurrency=2, pool_size=6)) as sandbox:
        assert sandbox.container_pool.wait_until_full(120)
        pooled = engine.client.containers.list(filters={"label": selector(sandbox=sandbox.labels.sandbox, role="policy")})
        assert len(pooled) >= 6  # started before any Episode asked for them
        first = evaluate_program(sandbox, program, split="train", seed=0, episodes=6)
        second = evaluate_program(sandbox, program, split="train", seed=1, episodes=6)
    outcomes = first.feedback.episodes + second.feedback.episodes
    assert all(o.failure is None for o in outcomes), [o.reason for o in outcomes if o.failure]
    containers = [o.output_tail.split()[1] for o in outcomes]
    assert all(o.output_tail.startswith("FRESH") for o in outcomes)
    assert len(set(containers)) == 12


def test_candidates_are_evaluated_concurrently_on_the_same_episodes(open_sandbox, write_program):
    steady = capture_program(write_program(STEADY))
    left = capture_program(write_program("class P:\n    def act(self, o):\n        return 0\ndef make_policy(c):\n    return P()\n"))
    with open_sandbox(tuning=SandboxTuning(concurrency=2, pool_size=4)) as sandbox:
        episodes = sandbox.plan("validation", 5, 4)
        together = evaluate_programs(sandbox, [steady, left], episodes)
        alone = evaluate_programs(sandbox, [left], episodes)
    assert [o.steps for o in together[0].episodes] == [500] * 4
    assert [(o.index, o.steps, o.reward) for o in together[1].episodes] == [(o.index, o.steps, o.reward) for o in alone[0].episodes]


def test_pool_is_drained_when_the_sandbox_closes(open_sandbox, engine):
    with open_sandbox(tuning=SandboxTuning(concurrency=2, pool_size=4)) as sandbox:
        assert sandbox.container_pool.wait_until_full(120)
        sandbox_id = sandbox.labels.sandbox
    assert engine.client.containers.list(all=True, filters={"label": selector(sandbox=sandbox_id)}) == []


def test_a_known_episode_count_bounds_the_pool(open_sandbox, write_program, engine):
    """A command that knows it runs 3 Episodes starts 3 policy containers (one more when its 2 lanes took them
    unevenly: a lane's container serves only that lane), not a full pool it would remove unused."""
    program = capture_program(write_program(STEADY))
    with ContainerCreations(engine.client) as created, open_sandbox(tuning=SandboxTuning(concurrency=2, pool_size=8, episodes=3)) as sandbox:
        evaluation = evaluate_program(sandbox, program, split="train", seed=0, episodes=3)
        # Nothing more is to come: the pool counts itself full with what it has (an unbounded one would want 8 ready).
        assert sandbox.container_pool.wait_until_full(0)
        assert sandbox.container_pool.ready_count() <= 1
        sandbox_id = sandbox.labels.sandbox
    assert [o.steps for o in evaluation.feedback.episodes] == [500] * 3
    policies = created.labelled(**{SANDBOX: sandbox_id, ROLE: "policy"})
    assert 3 <= len(policies) <= 4, [e.get("Actor", {}).get("Attributes", {}).get("name") for e in policies]


def test_a_long_cold_batch_removes_used_containers_beyond_keep_used_as_it_goes(open_sandbox, write_program, engine):
    """Used containers wait for the batch's end only up to keep_used; the memory of a long batch stays bounded."""
    program = capture_program(write_program("class P:\n    def act(self, o):\n        return 0\ndef make_policy(c):\n    return P()\n"))
    seen: list[int] = []
    done = threading.Event()
    with open_sandbox(tuning=SandboxTuning(concurrency=2, pool_size=0, keep_used=4)) as sandbox:
        policies = {"label": selector(sandbox=sandbox.labels.sandbox, role="policy")}

        def watch() -> None:
            while not done.is_set():
                seen.append(len(engine.client.containers.list(all=True, filters=policies, sparse=True)))
                time.sleep(0.1)

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            evaluation = evaluate_program(sandbox, program, split="train", seed=0, episodes=30)
        finally:
            done.set()
            watcher.join()
    assert [o.failure for o in evaluation.feedback.episodes] == [None] * 30
    # at most: 4 kept and 1 being removed, 2 in their Episodes, 2 ready and 2 starting for the lanes
    assert seen and max(seen) <= 11, seen
