"""Reproduction mode of `evaluate`: the seed and split reach the Benchmark's planning unchanged, each Episode's policy
seed is derived as EvoPolicyGym 0.3's evaluate derives it, and the returns are written in plan order; without
--reproduce nothing changes. A sandbox double stands in for the containers (this is the Host's planning)."""

from __future__ import annotations

import ast
import contextlib
import hashlib
import os
from pathlib import Path

import pytest

from epg_sdk.codes import EpisodeStatus, FailureCode
from epg_sdk.planning import policy_seed
from orchestrator.kernel.evaluation import evaluate_program, reproduction_policy_seed
from orchestrator.kernel.outcomes import EpisodeOutcome
from orchestrator.kernel.ports import BenchmarkInfo, EvaluationFeedback, PlannedEpisode
from tests.support.cli import invoke_cli

CASES = [(0, 0), (0, 1), (42, 7), (2**32 + 5, 1023), (2**64 - 1, 0), (123456789, 2**40)]


def documented_recipe(seed: int, index: int) -> int:
    """The recipe as EvoPolicyGym 0.3 documents it: sha256 of a domain string, the master seed and the Episode's index
    (8 bytes each, big-endian); the first 8 bytes of the digest, big-endian."""
    material = b"evopolicygym/policy-seed/v1\x00" + seed.to_bytes(8, "big") + index.to_bytes(8, "big")
    return int.from_bytes(hashlib.sha256(material).digest()[:8], "big")


@pytest.mark.parametrize(("seed", "index"), CASES)
def test_the_policy_seed_follows_the_documented_recipe(seed, index):
    assert reproduction_policy_seed(seed, index) == documented_recipe(seed, index)
    assert 0 <= reproduction_policy_seed(seed, index) < 2**64


def test_a_seed_outside_64_bits_is_refused():
    for seed in (-1, 2**64):
        with pytest.raises(ValueError):
            reproduction_policy_seed(seed, 0)


@pytest.mark.skipif(not os.environ.get("EPG_EVOPOLICYGYM_CHECKOUT"), reason="set EPG_EVOPOLICYGYM_CHECKOUT to a checkout of EvoPolicyGym 0.3")
def test_the_policy_seed_equals_the_reference_kernels_own_function():
    """Their function, taken from the checkout at test time (never copied here), run on the same values."""
    source = Path(os.environ["EPG_EVOPOLICYGYM_CHECKOUT"], "src", "evopolicygym", "evaluation", "_service.py").read_text()
    tree = ast.parse(source)
    wanted = [node for node in tree.body
              if (isinstance(node, ast.FunctionDef) and node.name == "_derive_policy_seed")
              or (isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "_POLICY_SEED_DOMAIN" for t in node.targets))]
    assert len(wanted) == 2, "the checkout no longer has _derive_policy_seed and its domain"
    namespace: dict[str, object] = {"hashlib": hashlib}
    exec(compile(ast.Module(body=wanted, type_ignores=[]), "reference", "exec"), namespace)
    theirs = namespace["_derive_policy_seed"]
    for seed, index in CASES:
        assert reproduction_policy_seed(seed, index) == theirs(seed, index)


class _Sandbox:
    """Plans what it is asked (remembering the request) and completes every Episode with the policy seed as its return,
    but the second, which fails."""

    def __init__(self) -> None:
        self.planned: list[tuple[str, int, int]] = []
        self.seeds: list[int] = []

    def describe(self):
        return BenchmarkInfo(id="X-v0", description="", observation_space={}, action_space={}, horizon=5, primary_metric="r",
                             direction="maximize", parameters={}, failure_return=-1.0, parameters_digest="sha256:" + "0" * 64)

    def plan(self, split, seed, count):
        self.planned.append((split, seed, count))
        return [PlannedEpisode(split=split, index=10 + i, payload=b"", policy_seed=policy_seed(seed, split, 10 + i)) for i in range(count)]

    def run_episodes(self, jobs, on_episode=None):
        outcomes = []
        for position, job in enumerate(jobs):
            self.seeds.append(job.episode.policy_seed)
            failed = position == 1
            outcome = EpisodeOutcome(index=job.episode.index, split=job.episode.split,
                                     status=EpisodeStatus.POLICY_FAILURE if failed else EpisodeStatus.COMPLETED,
                                     failure=FailureCode.EXCEPTION if failed else None, reason="", steps=1,
                                     reward=-1.0 if failed else float(job.episode.policy_seed % 1000), terminated=True,
                                     truncated=False, policy_seconds=0.0, environment_seconds=0.0)
            outcomes.append(outcome)
            if on_episode:
                on_episode(outcome)
        return outcomes

    def feedback(self, outcomes):
        return EvaluationFeedback(score=0.0, values={}, artifacts={}, episodes=tuple(outcomes))


def test_reproduction_passes_seed_and_split_unchanged_and_seeds_policies_by_plan_position():
    sandbox = _Sandbox()
    evaluation = evaluate_program(sandbox, None, split="validation", seed=2**63 + 9, episodes=3, reproduce=True)
    assert sandbox.planned == [("validation", 2**63 + 9, 3)]
    assert sandbox.seeds == [documented_recipe(2**63 + 9, position) for position in range(3)]
    assert evaluation.reproduction_seeds == tuple(sandbox.seeds)


def test_without_reproduce_the_policy_seeds_are_ours_as_before():
    sandbox = _Sandbox()
    evaluation = evaluate_program(sandbox, None, split="train", seed=5, episodes=3)
    assert sandbox.seeds == [policy_seed(5, "train", 10 + i) for i in range(3)]
    assert evaluation.reproduction_seeds == ()


@contextlib.contextmanager
def _fake_sandbox(monkeypatch, sandbox):
    import orchestrator.sandbox_opening as opening

    @contextlib.contextmanager
    def open_benchmark_sandbox(options, progress=None):
        yield sandbox

    monkeypatch.setattr(opening, "open_benchmark_sandbox", open_benchmark_sandbox)
    monkeypatch.setattr(opening, "sandbox_provenance", lambda sandbox, package: {})
    yield


def test_the_cli_writes_returns_in_plan_order_with_reproduce(monkeypatch, tmp_path, write_program):
    program = write_program("def make_policy(context):\n    return None\n")
    sandbox = _Sandbox()
    with _fake_sandbox(monkeypatch, sandbox):
        result = invoke_cli("evaluate", str(program), "--benchmark", "cartpole", "--count", "3", "--split", "test", "--seed", "77",
                            "--reproduce", "--json", "-o", str(tmp_path / "out"))
    assert result.exit_code == 0, result.stderr
    document = result.json()
    seeds = [documented_recipe(77, position) for position in range(3)]
    assert sandbox.planned == [("test", 77, 3)]
    assert document["reproduction"] == {"of": "evopolicygym-0.3", "seed": 77, "split": "test", "count": 3, "policy_seeds": seeds,
                                        "returns": [float(seeds[0] % 1000), None, float(seeds[2] % 1000)]}
    written = (tmp_path / "out" / "evaluation.json").read_text()
    assert '"reproduction"' in written


def test_the_cli_without_reproduce_writes_no_reproduction_and_keeps_its_seeds(monkeypatch, write_program):
    program = write_program("def make_policy(context):\n    return None\n")
    sandbox = _Sandbox()
    with _fake_sandbox(monkeypatch, sandbox):
        result = invoke_cli("evaluate", str(program), "--benchmark", "cartpole", "-n", "2", "--seed", "77", "--json")
    assert result.exit_code == 0, result.stderr
    assert "reproduction" not in result.json()
    assert sandbox.seeds == [policy_seed(77, "train", 10 + i) for i in range(2)]


def test_the_help_says_runs_never_use_reproduction_mode():
    result = invoke_cli("evaluate", "--help")
    assert result.exit_code == 0
    text = " ".join(result.stdout.replace("│", " ").split())
    assert "--reproduce" in text and "Runs never use this mode" in text
