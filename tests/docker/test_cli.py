"""`epg-orchestrate` end to end, as a user types it: a process of its own against the real engine.

Bad input and a missing engine, which need no engine, are in tests/unit/test_cli_json_and_exit_codes.py.
"""

from __future__ import annotations

import json

import pytest
from support.cli import run_cli


@pytest.mark.parametrize(
    ("benchmark", "package"),
    [("CartPole-v1", "cartpole"), ("Acrobot-v1", "acrobot"), ("MountainCarContinuous-v0", "mountaincar_continuous")],
)
def test_baselines_evaluate_end_to_end_through_the_cli(benchmark, package, scope, tmp_path):
    result = run_cli("evaluate", f"environments/{package}/baseline", "--benchmark", benchmark, "--episodes", "2", "--json", "--out", str(tmp_path), scope=scope)
    assert result.exit_code == 0, result.stderr
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
    result = run_cli("evaluate", "environments/cartpole/baseline", "-b", "cartpole", "-n", "2", scope=scope)
    assert result.exit_code == 0, result.stderr
    assert "score (mean_return):" in result.stdout
    assert "completed" in result.stdout and "sha256:" in result.stdout


def test_policy_failures_are_reported_not_fatal(scope, write_program):
    program = write_program("class P:\n    def act(self, o):\n        return 9\ndef make_policy(c):\n    return P()\n")
    result = run_cli("evaluate", str(program), "-b", "cartpole", "-n", "1", "--json", scope=scope)
    assert result.exit_code == 0, result.stderr
    (episode,) = json.loads(result.stdout)["episodes"]
    assert episode["status"] == "policy_failure" and episode["failure"] == "invalid_action"


def test_second_image_build_rebuilds_nothing(images):
    result = run_cli("images", "build", "policy-runtime", "env-cartpole")
    assert result.exit_code == 0, result.stderr
    assert "0 built, 2 up to date" in result.stdout
    assert images["policy-runtime"] in result.stdout


def test_images_list_shows_content_hash_tags(images):
    result = run_cli("images", "list")
    assert result.exit_code == 0, result.stderr
    assert images["policy-runtime"].split(":")[1] in result.stdout


def test_env_test_checks_an_environment_image_in_isolation(scope):
    result = run_cli("env", "test", "cartpole", "-n", "2", scope=scope)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.count(" ok ") >= 7 and "FAILED" not in result.stdout


def test_env_test_fails_a_broken_environment_and_says_why(scope):
    result = run_cli("env", "test", "ProbeCrash-v0", "--environments", "tests/environments", "-n", "1", scope=scope)
    assert result.exit_code != 0
    assert "FAILED" in result.stdout + result.stderr
    assert "simulator exploded" in result.stdout + result.stderr
