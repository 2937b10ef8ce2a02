"""`epg-orchestrate` end to end, as a user types it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def cli(*args: str, env: dict[str, str] | None = None, scope: str = "") -> subprocess.CompletedProcess:
    environment = {**os.environ, "EPG_SCOPE": scope, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "orchestrator.cli.app", *args], capture_output=True, text=True, env=environment, cwd=REPO, timeout=600
    )


@pytest.mark.parametrize(
    ("benchmark", "package"),
    [("CartPole-v1", "cartpole"), ("Acrobot-v1", "acrobot"), ("MountainCarContinuous-v0", "mountaincar_continuous")],
)
def test_baselines_evaluate_end_to_end_through_the_cli(benchmark, package, scope, tmp_path):
    result = cli("evaluate", f"environments/{package}/baseline", "--benchmark", benchmark, "--episodes", "2", "--json", "--out", str(tmp_path), scope=scope)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["benchmark"] == benchmark
    assert document["program_digest"].startswith("sha256:")
    assert len(document["episodes"]) == 2
    for episode in document["episodes"]:
        assert episode["status"] == "completed" and episode["failure"] is None
        assert episode["steps"] > 0 and isinstance(episode["reward"], float)
    assert document["score"] == pytest.approx(sum(e["reward"] for e in document["episodes"]) / 2)
    written = json.loads((tmp_path / "feedback.json").read_text())
    assert written["score"] == document["score"]
    assert (tmp_path / "artifacts" / "episodes.csv").read_text().count("\n") == 3
    assert "seed" not in written and "payload" not in json.dumps(written)


def test_evaluate_prints_a_table_and_the_score(scope):
    result = cli("evaluate", "environments/cartpole/baseline", "-b", "cartpole", "-n", "2", scope=scope)
    assert result.returncode == 0, result.stderr
    assert "score (mean_return):" in result.stdout
    assert "completed" in result.stdout and "sha256:" in result.stdout


def test_policy_failures_are_reported_not_fatal(scope, write_program):
    program = write_program("class P:\n    def act(self, o):\n        return 9\ndef make_policy(c):\n    return P()\n")
    result = cli("evaluate", str(program), "-b", "cartpole", "-n", "1", "--json", scope=scope)
    assert result.returncode == 0, result.stderr
    (episode,) = json.loads(result.stdout)["episodes"]
    assert episode["status"] == "policy_failure" and episode["failure"] == "invalid_action"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["evaluate", "environments", "-b", "cartpole"], "has no policy.py"),
        (["evaluate", "environments/cartpole/baseline", "-b", "pong"],
         "unknown benchmark 'pong'; known: Acrobot-v1, Ant-v5, BipedalWalker-v3, CarRacing-v3, CartPole-v1"),
    ],
)
def test_bad_input_gets_one_clear_line_and_a_nonzero_exit(args, message, scope):
    result = cli(*args, scope=scope)
    assert result.returncode == 1
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr


def test_no_docker_daemon_gets_one_clear_line(tmp_path):
    result = cli("evaluate", "environments/cartpole/baseline", "-b", "cartpole", env={"DOCKER_HOST": f"unix://{tmp_path}/none.sock"})
    assert result.returncode == 3
    assert "engine_unavailable: no Docker daemon answers" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_second_image_build_rebuilds_nothing(images):
    result = cli("images", "build", "policy-runtime", "env-cartpole")
    assert result.returncode == 0, result.stderr
    assert "0 built, 2 up to date" in result.stdout
    assert images["policy-runtime"] in result.stdout


def test_images_list_shows_content_hash_tags(images):
    result = cli("images", "list")
    assert result.returncode == 0, result.stderr
    assert images["policy-runtime"].split(":")[1] in result.stdout


def test_env_test_checks_an_environment_image_in_isolation(scope):
    result = cli("env", "test", "cartpole", "-n", "2", scope=scope)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count(" ok ") >= 7 and "FAILED" not in result.stdout


def test_env_test_fails_a_broken_environment_and_says_why(scope):
    result = cli("env", "test", "ProbeCrash-v0", "--environments", "tests/environments", "-n", "1", scope=scope)
    assert result.returncode != 0
    assert "FAILED" in result.stdout + result.stderr
    assert "simulator exploded" in result.stdout + result.stderr
