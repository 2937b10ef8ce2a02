"""`env new`: the generated package is a valid environment package holding gymnasium's real spaces."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib

import pytest

from epg_sdk.readme import AGENT_BEGIN, package_readme
from orchestrator.images.catalogue import load_package
from orchestrator.scaffold import ScaffoldError, new_gymnasium_package


def test_generated_package_is_read_by_the_catalogue(tmp_path):
    made = new_gymnasium_package(tmp_path / "pend", "Pendulum-v1", benchmark_id="MyPendulum-v1", name="my-pendulum", failure_return=-4000)
    package = load_package(made.root)
    assert package.table.benchmarks == {"MyPendulum-v1": "epg_env_my_pendulum:make_benchmark"}
    assert (package.image, package.table.aliases) == ("env-my-pendulum", ("my-pendulum",))
    assert package.baseline_dir.joinpath("policy.py").is_file()
    project = tomllib.loads((made.root / "pyproject.toml").read_text())["project"]
    assert project["name"] == "epg-env-my-pendulum"
    assert project["dependencies"][0].startswith("epg-sdk[gym]==")
    lock = (made.root / "requirements.lock").read_text().splitlines()
    assert any(line.startswith("gymnasium==") for line in lock) and any(line.startswith("numpy==") for line in lock)
    assert all("==" in line for line in lock)


def test_generated_package_pins_what_the_runner_imports_at_the_sdk_layers_versions_whatever_is_installed(tmp_path, monkeypatch):
    import orchestrator.scaffold as scaffold
    from orchestrator.images.pins import sdk_layer_versions

    installed = scaffold.metadata.version
    monkeypatch.setattr(scaffold.metadata, "version", lambda name: "0.0.1" if name in ("numpy", "typing-extensions") else installed(name))
    made = new_gymnasium_package(tmp_path / "cp", "CartPole-v1", benchmark_id="MyCartPole-v1", name="my-cartpole")
    layer = sdk_layer_versions()
    lock = (made.root / "requirements.lock").read_text().splitlines()
    assert f"numpy=={layer['numpy']}" in lock and f"typing-extensions=={layer['typing-extensions']}" in lock
    assert f"gymnasium=={installed('gymnasium')}" in lock  # the gymnasium its README and tests were made from
    dependencies = tomllib.loads((made.root / "pyproject.toml").read_text())["project"]["dependencies"]
    assert f"numpy=={layer['numpy']}" in dependencies and "0.0.1" not in "".join(lock + dependencies)


def test_generated_readme_and_tests_hold_the_real_spaces(tmp_path):
    made = new_gymnasium_package(tmp_path / "cp", "CartPole-v1", benchmark_id="MyCartPole-v1", name="my-cartpole")
    readme = (made.root / "README.md").read_text()
    assert readme.startswith("# MyCartPole-v1")
    assert "`Discrete(2)`" in readme and "One integer in `[0, 1]`" in readme
    assert "**Horizon:** 500 steps" in readme
    module = (made.root / "epg_env_my_cartpole" / "__init__.py").read_text()
    assert 'GYMNASIUM_ID = "CartPole-v1"' in module and "HORIZON = 500" in module
    compile(module, "module", "exec")
    tests = (made.root / "tests" / "test_benchmark.py").read_text()
    action = json.loads(tests.split("ACTION_SPACE = json.loads('")[1].split("')")[0])
    assert action == {"type": "discrete", "n": 2, "start": 0}


def test_generated_readme_gives_the_agent_its_contract_and_keeps_maintainer_sections_out(tmp_path):
    made = new_gymnasium_package(tmp_path / "cp", "CartPole-v1", benchmark_id="MyCartPole-v1", name="my-cartpole")
    agent = package_readme(str(made.root / "epg_env_my_cartpole" / "__init__.py"))
    assert AGENT_BEGIN in (made.root / "README.md").read_text()
    assert {"Observation", "Action", "Episode", "Failure", "Score", "Feedback"} <= _headings(agent)
    assert not _headings(agent) & {"Baseline", "Tests", "Versions", "gymnasium's description"}
    assert "`Discrete(2)`" in agent and "epg-orchestrate env new" not in agent


def test_generated_package_passes_its_own_tests(tmp_path):
    made = new_gymnasium_package(tmp_path / "mc", "MountainCarContinuous-v0", benchmark_id="MyMountainCar-v0", name="my-mountaincar",
                                 failure_return=-100)
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(made.root / "tests")],
                            capture_output=True, text=True, cwd=made.root, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:]
    assert "6 passed" in result.stdout


@pytest.mark.parametrize(
    ("gym_id", "name", "message"),
    [("NoSuchEnv-v9", "ok-name", "gymnasium.make('NoSuchEnv-v9') failed"), ("CartPole-v1", "Bad Name", "name 'bad name'")],
)
def test_bad_input_is_refused_and_nothing_is_written(tmp_path, gym_id, name, message):
    with pytest.raises(ScaffoldError, match=message.replace("(", r"\(").replace(")", r"\)")):
        new_gymnasium_package(tmp_path / "x", gym_id, benchmark_id="X-v0", name=name)
    assert not (tmp_path / "x").exists()


def test_an_existing_non_empty_directory_is_refused(tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(ScaffoldError, match="not an empty directory"):
        new_gymnasium_package(tmp_path, "CartPole-v1", benchmark_id="X-v0", name="x")
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


def _headings(markdown: str) -> set[str]:
    return {m.group(1).strip() for m in re.finditer(r"^#{1,6} (.+)$", markdown, flags=re.MULTILINE)}
