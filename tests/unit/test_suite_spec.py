"""Suite files: validation with field paths, presets, and the plan of ordinary Run specs they expand into."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from orchestrator.images.catalogue import discover
from orchestrator.run.preflight import preflight
from orchestrator.run.spec import RandomAgent, RunSpec
from orchestrator.suite.directory import SuiteBusy, SuiteDirectory
from orchestrator.suite.presets import CORE16
from orchestrator.suite.scheduler import SchedulerOptions, run_command
from orchestrator.suite.spec import (
    SuiteSpec,
    SuiteSpecError,
    load_suite,
    name_collisions,
    plan_suite,
    spec_yaml,
)

REPO = Path(__file__).resolve().parents[2]
PROBE = REPO / "tests" / "environments"


def write(path: Path, document: dict) -> Path:
    path.write_text(yaml.safe_dump(document))
    return path


MINIMAL = {"name": "pair", "benchmarks": ["cartpole", "Acrobot-v1"],
           "agents": [{"name": "hc", "agent": {"kind": "hill-climb"}}, {"name": "rnd", "agent": {"kind": "random"}}]}


def test_a_suite_plans_one_run_spec_per_benchmark_agent_and_repeat(tmp_path):
    suite = SuiteSpec.model_validate({**MINIMAL, "repeats": 2, "seed": 7, "seed_key_file": "keys/k",
                                      "protocol": {"budget": {"episodes": 5}, "assessment": {"episodes": 3}}})
    plan = plan_suite(suite, tmp_path, discover())
    assert [p.name for p in plan] == ["cartpole-v1--hc--r0", "cartpole-v1--hc--r1", "cartpole-v1--rnd--r0", "cartpole-v1--rnd--r1",
                                      "acrobot-v1--hc--r0", "acrobot-v1--hc--r1", "acrobot-v1--rnd--r0", "acrobot-v1--rnd--r1"]
    first, second = plan[0].spec, plan[1].spec
    assert (first.benchmark, first.seed, second.seed) == ("CartPole-v1", 7, 8)
    assert (first.budget.episodes, first.assessment.episodes) == (5, 3)
    assert first.seed_key_file == str((tmp_path / "keys" / "k").resolve())
    assert isinstance(plan[2].spec.agent, RandomAgent)
    assert {p.family for p in plan} == {"classic control"}
    assert (plan[0].run_dir, plan[0].spec_file) == ("runs/cartpole-v1--hc--r0", "specs/cartpole-v1--hc--r0.yaml")
    # What the suite writes is a spec `epg-orchestrate run` reads back to the same Run.
    assert RunSpec.model_validate(yaml.safe_load(spec_yaml(first))) == first


def test_the_core16_preset_expands_to_the_sixteen_published_benchmarks_with_their_families(tmp_path):
    suite = SuiteSpec.model_validate({**MINIMAL, "benchmarks": "core16"})
    plan = plan_suite(suite, tmp_path, discover())
    assert [p.benchmark for p in plan[::2]] == [benchmark for benchmark, _ in CORE16]
    assert {p.family for p in plan} == {"classic control", "Box2D", "MuJoCo", "MiniGrid", "highway-env", "Fetch"}
    assert SuiteSpec.model_validate({**MINIMAL, "benchmarks": ["CartPole-v1", "core16"]}).benchmark_names()[:2] == ["CartPole-v1", "Acrobot-v1"]


def test_every_benchmark_of_core16_and_cartpole_ships_the_random_program_the_random_agent_needs(tmp_path):
    suite = SuiteSpec.model_validate({**MINIMAL, "benchmarks": ["cartpole", "core16"], "agents": [MINIMAL["agents"][1]]})
    for planned in plan_suite(suite, tmp_path, discover()):
        assert preflight(planned.spec, tmp_path, discover()) == [], planned.name


def test_the_random_agent_on_a_benchmark_without_a_random_program_is_refused_before_anything_starts(tmp_path):
    spec = RunSpec.model_validate({"benchmark": "probe", "agent": {"kind": "random"}})
    packages = discover([PROBE])
    (problem,) = preflight(spec, tmp_path, packages)
    assert problem.startswith("agent.kind: ") and "random" in problem and "is not a directory" in problem


def test_invalid_suites_name_the_field_and_the_reason(tmp_path):
    bad = {**MINIMAL, "repeats": 0, "surprise": 1,
           "agents": [{"name": "a", "agent": {"kind": "random", "episodes_per_submission": 0}}, {"name": "a", "agent": {"kind": "random"}}]}
    with pytest.raises(SuiteSpecError) as caught:
        load_suite(write(tmp_path / "suite.yaml", bad))
    problems = caught.value.problems
    assert "repeats: Input should be greater than or equal to 1" in problems
    assert "surprise: unknown key" in problems
    assert "agents.0.agent.episodes_per_submission: Input should be greater than or equal to 1" in problems
    with pytest.raises(SuiteSpecError) as caught:
        load_suite(write(tmp_path / "twice.yaml", {**MINIMAL, "agents": [MINIMAL["agents"][0]] * 2}))
    assert caught.value.problems == ["(top level): agents: names must be distinct (hc twice)"]


def test_an_unknown_or_repeated_benchmark_is_a_problem_of_the_plan(tmp_path):
    suite = SuiteSpec.model_validate({**MINIMAL, "benchmarks": ["cartpole", "NoSuch-v0", "CartPole-v1"]})
    with pytest.raises(SuiteSpecError) as caught:
        plan_suite(suite, tmp_path, discover())
    assert [p.split(":")[0] for p in caught.value.problems] == ["benchmarks.1", "benchmarks.2"]
    assert "CartPole-v1 is named twice" in caught.value.problems[1]


def test_the_examples_plan_and_pass_the_preflight_of_their_agents_that_need_no_credential(tmp_path):
    for path in sorted((REPO / "examples" / "suites").glob("*.yaml")):
        suite, _ = load_suite(path)
        for planned in plan_suite(suite, path.parent, discover()):
            problems = preflight(planned.spec, path.parent, discover(), environ={"OPENAI_API_KEY": "x"})
            assert problems == [], (path.name, planned.name)


def test_a_run_never_started_is_run_and_an_interrupted_one_resumed(tmp_path):
    suite = SuiteSpec.model_validate(MINIMAL)
    plan = plan_suite(suite, tmp_path, discover())
    directory = SuiteDirectory(tmp_path / "suite")
    directory.create("name: pair\n", "pair", tmp_path, plan)
    (run,) = [r for r in directory.read_manifest()["runs"] if r["name"] == "cartpole-v1--hc--r0"]
    options = SchedulerOptions(base="debootstrap", environments=[PROBE], scope="s1")
    assert run_command(directory, run, options) == [
        "run", str(directory.root / "specs" / "cartpole-v1--hc--r0.yaml"), "--output", str(directory.root / "runs" / "cartpole-v1--hc--r0"),
        "--json", "--base", "debootstrap", "--environments", str(PROBE), "--scope", "s1"]
    (directory.root / "runs" / "cartpole-v1--hc--r0").mkdir()
    (directory.root / "runs" / "cartpole-v1--hc--r0" / "events.jsonl").write_text("")
    assert run_command(directory, run, SchedulerOptions())[:3] == ["run", "--resume", str(directory.root / "runs" / "cartpole-v1--hc--r0")]
    with pytest.raises(FileExistsError):
        directory.create("name: pair\n", "pair", tmp_path, plan)


def test_one_process_at_a_time_runs_a_suite(tmp_path):
    directory = SuiteDirectory(tmp_path / "suite")
    directory.create("name: pair\n", "pair", tmp_path, plan_suite(SuiteSpec.model_validate(MINIMAL), tmp_path, discover()))
    held = directory.lock()
    with pytest.raises(SuiteBusy, match="another process is running the suite"):
        SuiteDirectory(tmp_path / "suite").lock()
    held.close()
    directory.lock().close()


def test_runs_that_would_share_a_directory_are_refused_when_the_suite_is_planned(tmp_path):
    assert name_collisions(["Foo_Bar-v0", "foo-bar-v0"], ["a"], 1) == [
        "benchmarks.1: foo-bar-v0 with agent a, repeat 0 would share the run directory runs/foo-bar-v0--a--r0 "
        "with Foo_Bar-v0 with agent a, repeat 0; rename one of them"]
    assert [p.split(":")[0] for p in name_collisions(["b", "b--x"], ["x--y", "y"], 2)] == ["benchmarks.1"]
    assert name_collisions(["CartPole-v1", "Acrobot-v1"], ["hc", "rnd"], 3) == []
    suite = SuiteSpec.model_validate({**MINIMAL, "agents": [{"name": "Hc", "agent": {"kind": "hill-climb"}},
                                                            {"name": "hc", "agent": {"kind": "random"}}]})
    with pytest.raises(SuiteSpecError) as caught:
        plan_suite(suite, tmp_path, discover())
    assert [p.split(":")[0] for p in caught.value.problems] == ["agents.1.name"]
    assert "runs/cartpole-v1--hc--r0" in caught.value.problems[0]
