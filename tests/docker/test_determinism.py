"""The same Program, seed and Episodes give identical results."""

from __future__ import annotations

from orchestrator.kernel.evaluation import evaluate_program
from orchestrator.kernel.program import capture_program

RANDOM_POLICY = '''
class Policy:
    def __init__(self, rng):
        self.rng = rng
    def act(self, observation):
        return int(self.rng.integers(0, 2))

def make_policy(context):
    return Policy(context.rng)
'''


def _summary(evaluation):
    return evaluation.feedback.score, [(o.index, o.status, o.steps, o.reward, o.terminated) for o in evaluation.feedback.episodes]


def test_same_program_seed_and_episodes_give_identical_results(open_sandbox, write_program):
    program = capture_program(write_program(RANDOM_POLICY))
    with open_sandbox() as sandbox:
        first = evaluate_program(sandbox, program, split="train", seed=7, episodes=4)
        second = evaluate_program(sandbox, program, split="train", seed=7, episodes=4)
        other = evaluate_program(sandbox, program, split="train", seed=8, episodes=4)
    assert _summary(first) == _summary(second)
    assert _summary(first) != _summary(other)
    assert first.feedback.values == second.feedback.values


def test_splits_plan_disjoint_episodes(open_sandbox):
    with open_sandbox() as sandbox:
        payloads = {split: {e.payload for e in sandbox.plan(split, 3, 64)} for split in ("train", "validation", "test")}
    assert all(len(p) == 64 for p in payloads.values())
    assert not payloads["train"] & payloads["validation"]
    assert not payloads["train"] & payloads["test"]
    assert not payloads["validation"] & payloads["test"]
