"""The helpers authors' tests share, without an engine: epg_sdk.testing, epg_sdk.checks and the plugin's pure parts."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from epg_sdk.benchmark import Benchmark, BenchmarkSpec, EpisodeRecord, Feedback, InvalidAction, StepResult
from epg_sdk.checks import FEEDBACK_LIMIT_BYTES, cycle_actions, feedback_bytes
from epg_sdk.codes import EpisodeStatus
from epg_sdk.testing import drive_environment, entry_point_ids, locked_pins, run_python, summary_values
from orchestrator.pytest_plugin import assert_episodes_completed


@dataclass
class _Counter:
    """An Environment whose observation counts the actions; the Episode terminates when it reaches `goal`."""

    goal: int
    total: int = 0
    closed: bool = False

    def reset(self) -> int:
        return self.total

    def step(self, action: int) -> StepResult:
        self.total += action
        return StepResult(observation=self.total, reward=float(action), terminated=self.total >= self.goal)

    def summary(self) -> dict[str, Any]:
        return {"total": self.total}

    def close(self) -> None:
        self.closed = True


class _CounterBenchmark(Benchmark):
    spec = BenchmarkSpec(id="Counter-v0", description="counts", horizon=5, failure_return=0.0,
                         observation_space={"type": "discrete", "n": 10}, action_space={"type": "discrete", "n": 3, "start": 0})

    def plan(self, split: str, seed: int, count: int) -> list[bytes]:
        return [f"{split}:{seed}:{i}".encode() for i in range(count)]

    def make_environment(self, payload: bytes) -> _Counter:
        return _Counter(goal=int(payload.decode().rsplit(":", 1)[1]) or 100)

    def validate_action(self, action: Any) -> int:
        if action not in (0, 1, 2):
            raise InvalidAction(f"{action!r} is not 0, 1 or 2")
        return int(action)


def test_drive_environment_steps_until_the_episode_ends_and_hands_back_the_open_environment() -> None:
    environment, observations, results = drive_environment(_CounterBenchmark(), b"train:0:3", lambda observation, step: 1)
    assert observations == [0, 1, 2, 3] and [r.terminated for r in results] == [False, False, True]
    assert environment.summary() == {"total": 3} and not environment.closed


def test_drive_environment_stops_at_the_limit_or_the_horizon_and_passes_the_step() -> None:
    steps: list[int] = []
    _, observations, results = drive_environment(_CounterBenchmark(), b"train:0:0", lambda observation, step: steps.append(step) or 2, limit=2)
    assert (observations, len(results), steps) == ([0, 2, 4], 2, [0, 1])
    _, _, results = drive_environment(_CounterBenchmark(), b"train:0:0", lambda observation, step: 0)
    assert len(results) == _CounterBenchmark.spec.horizon


def test_drive_environment_validates_every_action() -> None:
    with pytest.raises(InvalidAction):
        drive_environment(_CounterBenchmark(), b"train:0:0", lambda observation, step: 7)


def test_cycle_actions_sends_the_actions_in_turn_whatever_the_observation() -> None:
    choose = cycle_actions([0, 2, 1])
    assert [choose(object(), step) for step in range(7)] == [0, 2, 1, 0, 2, 1, 0]
    with pytest.raises(ValueError):
        cycle_actions([])


def test_feedback_bytes_measures_the_encoded_values() -> None:
    small, large = Feedback(score=0.0, values={"a": 1}), Feedback(score=0.0, values={"blob": "x" * (FEEDBACK_LIMIT_BYTES + 1)})
    assert 0 < feedback_bytes(small) < 64
    assert feedback_bytes(large) > FEEDBACK_LIMIT_BYTES


def test_summary_values_reads_one_key_of_each_episode_in_plan_order() -> None:
    records = [EpisodeRecord(index=i, status="completed", failure=None, steps=1, total_reward=0.0, terminated=True, truncated=False,
                             summary={"trace": f"t{i}"}) for i in range(3)]
    assert summary_values(_CounterBenchmark().feedback(records), "trace") == ["t0", "t1", "t2"]


def _package(root: Path, entries: dict[str, str]) -> Path:
    lines = "\n".join(f'"{name}" = "{entry}"' for name, entry in entries.items())
    (root / "pyproject.toml").write_text(f'[project]\nname = "epg-env-toy"\n[project.entry-points."epg.benchmarks"]\n{lines}\n')
    (root / "epg_env_toy_helpers.py").write_text(
        "from types import SimpleNamespace\n\n"
        "def make_a():\n    return SimpleNamespace(spec=SimpleNamespace(id='A-v0'))\n\n"
        "def make_b():\n    return SimpleNamespace(spec=SimpleNamespace(id='A-v0'))\n")
    return root


def test_entry_point_ids_maps_each_registered_id_to_the_id_its_factory_makes(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    package = _package(tmp_path, {"A-v0": "epg_env_toy_helpers:make_a", "B-v0": "epg_env_toy_helpers:make_b"})
    assert entry_point_ids(package) == {"A-v0": "A-v0", "B-v0": "A-v0"}  # B's factory makes the wrong Benchmark


def test_locked_pins_reads_the_lock_without_comments_or_blank_lines(tmp_path: Path) -> None:
    (tmp_path / "requirements.lock").write_text("# pinned\nnumpy==2.4.6\n\ngymnasium==1.3.0\n")
    assert locked_pins(tmp_path) == {"numpy": "2.4.6", "gymnasium": "1.3.0"}


def test_run_python_puts_the_package_first_on_the_path_and_drops_the_named_variables(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("EPG_HELPER_PROBE", "set")
    code = "import os, sys; print(sys.path[1] if sys.path[0] == '' else sys.path[0]); print(os.environ.get('EPG_HELPER_PROBE'))"
    kept = run_python(code, tmp_path)
    dropped = run_python(code, tmp_path, unset=["EPG_HELPER_PROBE"])
    assert kept.returncode == dropped.returncode == 0, kept.stderr + dropped.stderr
    assert kept.stdout.splitlines() == [str(tmp_path), "set"]
    assert dropped.stdout.splitlines() == [str(tmp_path), "None"]


def _outcome(index: int, status: str = "completed", failure: str | None = None, steps: int = 5) -> SimpleNamespace:
    return SimpleNamespace(index=index, status=EpisodeStatus(status), failure=failure, steps=steps)


def test_assert_episodes_completed_passes_a_baseline_that_completed_every_episode() -> None:
    assert_episodes_completed(SimpleNamespace(episodes=(_outcome(0), _outcome(1))))


@pytest.mark.parametrize(("episodes", "message"), [
    ((), "Toy-v0: the Feedback holds no Episode"),
    ((_outcome(0), _outcome(2)), "Episode indices are [0, 2], not 0..1"),
    ((_outcome(0), _outcome(1, "policy_failure", "timeout")), "Episode 1: policy_failure, failure timeout"),
    ((_outcome(0, steps=0),), "Episode 0: 0 steps"),
], ids=["none", "gap", "failure", "no-steps"])
def test_assert_episodes_completed_names_what_went_wrong(episodes, message) -> None:
    with pytest.raises(pytest.fail.Exception) as failure:
        assert_episodes_completed(SimpleNamespace(episodes=episodes), "Toy-v0")
    assert message in str(failure.value) and str(failure.value).startswith("Toy-v0: ")


def _pytest(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=directory, env=dict(os.environ),
                          capture_output=True, text=True, timeout=120, check=False)


def test_the_package_directory_is_the_package_the_test_module_sits_in(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "a-repository"\n')
    package = tmp_path / "environments" / "toy"
    (package / "tests" / "image").mkdir(parents=True)
    (package / "pyproject.toml").write_text('[tool.epg]\nimage = "env-toy"\nmodule = "epg_env_toy"\n')
    (package / "tests" / "image" / "test_where.py").write_text(
        "from pathlib import Path\n\n"
        f"def test_where(epg_package_dir):\n    assert epg_package_dir == Path({str(package)!r})\n")
    (tmp_path / "test_top.py").write_text(
        "from pathlib import Path\n\n"
        f"def test_top(epg_package_dir):\n    assert epg_package_dir == Path({str(tmp_path)!r})\n")
    result = _pytest(tmp_path, "-q", "--rootdir", str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 passed" in result.stdout
    overridden = _pytest(tmp_path, "-q", "--rootdir", str(tmp_path), "--epg-package", str(package), "test_top.py")
    assert overridden.returncode == 1 and "1 failed" in overridden.stdout, overridden.stdout
