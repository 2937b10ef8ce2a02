"""The random agent kind: its spec, the Program the Host hands it (read-only), its command and how much it submits."""

from __future__ import annotations

from pathlib import Path

from orchestrator.agents.random_program import next_count
from orchestrator.images.catalogue import discover, load_package, resolve_benchmark
from orchestrator.records.run_dir import RunDirectory
from orchestrator.run.agent_container import PLAN_DIR, agent_command, prepare_plan
from orchestrator.run.spec import RandomAgent, RunSpec

STATUS = {"pool_size": 8, "episodes_left": 6, "max_episodes_per_submission": 0, "submissions_left": 3}


def test_a_random_agent_is_a_run_specs_agent_kind():
    spec = RunSpec.model_validate({"benchmark": "cartpole", "agent": {"kind": "random"}})
    assert spec.agent == RandomAgent(kind="random", episodes_per_submission=1)


def test_it_runs_the_random_module_on_the_program_the_host_mounted():
    spec = RunSpec.model_validate({"benchmark": "cartpole", "agent": {"kind": "random", "episodes_per_submission": 3}})
    assert agent_command(spec) == ("python3", "-m", "orchestrator.agents.random_program", "--program", f"{PLAN_DIR}/random",
                                   "--workspace", "/workspace", "--episodes-per-submission", "3")


def test_the_host_copies_the_benchmark_packages_random_program_into_the_agents_plan(tmp_path):
    spec = RunSpec.model_validate({"benchmark": "cartpole", "agent": {"kind": "random"}})
    package, _, _ = resolve_benchmark("cartpole", discover())
    records = RunDirectory(tmp_path / "run")
    records.create("benchmark: cartpole\n")
    plan = prepare_plan(spec, tmp_path, records, package.random_dir)
    assert plan == records.agent / "plan"
    copied = plan / "random" / "policy.py"
    assert copied.read_bytes() == (package.random_dir / "policy.py").read_bytes()
    assert copied.stat().st_mode & 0o777 == 0o644 and (plan / "random").stat().st_mode & 0o777 == 0o755
    # A resumed Run finds it there and copies nothing again.
    copied.write_text("# kept\n")
    assert prepare_plan(spec, tmp_path, records, Path("/nonexistent")) == plan and copied.read_text() == "# kept\n"


def test_an_evopolicygym_packages_random_program_is_the_one_beside_its_baseline():
    root = Path(__file__).resolve().parents[1] / "data" / "evopolicygym" / "stdlib_counter"
    package = load_package(root)
    assert package.random_dir == root / "src" / "stdlib_counter" / "programs" / "random"
    assert package.random_dir.parent == package.baseline_dir.parent and (package.random_dir / "policy.py").is_file()


def test_it_asks_for_what_the_budget_can_pay_and_nothing_without_submissions():
    assert next_count(STATUS, 1) == 1
    assert next_count(STATUS, 100) == 6
    assert next_count({**STATUS, "max_episodes_per_submission": 4}, 100) == 4
    assert next_count({**STATUS, "pool_size": 2}, 100) == 2
    assert next_count({**STATUS, "submissions_left": 0}, 1) == 0
    assert next_count({**STATUS, "episodes_left": 0}, 1) == 0
