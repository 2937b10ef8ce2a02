"""The CLI as scripts drive it, without an engine: one JSON object per command under --json, one exit-code scheme.

Exit codes: 0 ok, 1 bad input (or a failed check), 2 usage, 3 infrastructure. The commands run in this process
through typer's runner; what needs the engine is in tests/docker/test_cli_contract.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from support.cli import REPO, invoke_cli

BASELINE = REPO / "environments" / "cartpole" / "baseline"
NO_ENGINE_MESSAGE = "engine_unavailable: no Docker daemon answers; start one with `make docker` (scripts/ensure-docker.sh)"


def no_engine(tmp_path: Path) -> dict[str, str]:
    return {"DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"}


def write_spec(directory: Path, **fields) -> Path:
    spec = {"benchmark": "CartPole-v1", "agent": {"kind": "hill-climb"}, **fields}
    path = directory / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


# --version and --json per command ---------------------------------------------------------------

def test_version_names_the_orchestrator_sdk_and_abi():
    result = invoke_cli("--version")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("epg-orchestrate 0.1.0 (epg-sdk 0.1.0, policy ABI 1, Python 3.")


def test_spec_check_json_of_a_valid_spec():
    result = invoke_cli("spec", "check", "examples/cartpole.yaml", "--json")
    assert result.exit_code == 0
    assert result.json() == {"spec": "examples/cartpole.yaml", "valid": True, "problems": [], "benchmark": "CartPole-v1",
                             "agent": "hill-climb", "episodes": 96, "submissions": 12, "relay": []}


def test_spec_schema_is_the_json_schema_of_specs():
    result = invoke_cli("spec", "schema")
    assert result.exit_code == 0
    schema = json.loads(result.stdout)
    assert schema["title"] == "RunSpec" and "benchmark" in schema["required"]


def test_benchmarks_json_names_each_benchmark_with_its_package_and_version():
    result = invoke_cli("benchmarks", "--json")
    assert result.exit_code == 0, result.stderr
    rows = {row["id"]: row for row in result.json()["benchmarks"]}
    assert rows["CartPole-v1"] | {"package": ""} == {
        "id": "CartPole-v1", "entry": "epg_env_cartpole:make_benchmark", "aliases": ["cartpole"], "image": "env-cartpole",
        "package": "", "distribution": "epg-env-cartpole", "version": "0.1.0", "python": "3.11",
    }
    assert {"Acrobot-v1", "MountainCarContinuous-v0"} <= set(rows)
    assert result.json()["not_built"] == []  # no EvoPolicyGym package in the bundled catalogue


def test_env_new_json_names_the_package_it_made(tmp_path):
    result = invoke_cli("env", "new", str(tmp_path / "pendulum"), "--gymnasium", "Pendulum-v1", "--json")
    assert result.exit_code == 0, result.stderr
    assert result.json() == {"root": str(tmp_path / "pendulum"), "benchmark_id": "Pendulum-v1", "image": "env-pendulum"}
    assert (tmp_path / "pendulum" / "pyproject.toml").is_file()


# spec check: everything run checks before starting --------------------------------------------
# (the agent image, which only the engine can check, is in tests/docker/test_cli_contract.py)

@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"benchmark": "NoSuchBench"}, "benchmark: unknown benchmark 'NoSuchBench'"),
        ({"initial_program": "missing"}, "initial_program: "),
        ({"agent": {"kind": "scripted", "steps": [{"program": "nowhere", "episodes": "0:2"}]}}, "agent.steps.0.program: "),
        ({"seed_key_file": "no.key"}, "seed_key_file: "),
        ({"agent": {"kind": "codex", "model": "m"}, "relay": {"credential_env": "EPG_TEST_UNSET_CREDENTIAL"}},
         "relay.credential_env: the spec sends EPG_TEST_UNSET_CREDENTIAL to api.openai.com (EPG_TEST_UNSET_CREDENTIAL is not"),
        ({"budget": {"episodes": 0}}, "budget.episodes: Input should be greater than or equal to 1"),
    ],
    ids=["benchmark", "initial_program", "scripted_step", "seed_key", "credential", "field"],
)
def test_spec_check_reports_what_run_would_refuse_as_field_path_and_reason(tmp_path, fields, problem):
    spec = write_spec(tmp_path, **fields)
    text = invoke_cli("spec", "check", str(spec), env={"EPG_TEST_UNSET_CREDENTIAL": ""})
    assert text.exit_code == 1
    assert f"{spec}: {problem}" in text.stderr
    result = invoke_cli("spec", "check", str(spec), "--json", env={"EPG_TEST_UNSET_CREDENTIAL": ""})
    document = result.json()
    assert result.exit_code == 1 and document["valid"] is False
    assert any(line.startswith(problem) for line in document["problems"]), document["problems"]
    # run refuses the same spec before starting anything (no engine is even asked), with the same line.
    refused = invoke_cli("run", str(spec), "-o", str(tmp_path / "run"), env={"EPG_TEST_UNSET_CREDENTIAL": "", **no_engine(tmp_path)})
    assert refused.exit_code == 1 and problem in refused.stderr
    assert not (tmp_path / "run").exists()


def test_spec_check_gives_a_yaml_error_as_line_and_column(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text("benchmark: CartPole-v1\nagent: {kind: hill-climb\nbudget: 3\n")
    result = invoke_cli("spec", "check", str(spec))
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [f"{spec}:3:7: expected ',' or '}}', but got ':' (while parsing a flow mapping)"]


# exit codes ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "args",
    [
        ["evaluate", str(BASELINE)],  # --benchmark missing
        ["evaluate", "no/such/dir", "-b", "cartpole"],
        ["evaluate", str(BASELINE), "-b", "cartpole", "--split", "dev"],
        ["evaluate", str(BASELINE), "-b", "cartpole", "--memory", "lots"],
        ["run", "--no-such-option"],
        ["run"],
        ["run", "examples/cartpole.yaml", "--resume", "examples"],
        ["runs", "list", "/nonexistent"],
        ["runs", "show", "/nonexistent"],
        ["benchmarks", "--environments", "/nonexistent"],
        ["spec", "check", "/nonexistent.yaml"],
        ["images", "frobnicate"],
        ["env", "test"],
    ],
    ids=lambda args: " ".join(args)[:60],
)
def test_usage_errors_exit_2(args, tmp_path):
    result = invoke_cli(*args, env=no_engine(tmp_path))
    assert result.exit_code == 2, result.stdout + result.stderr


def test_resume_of_a_directory_that_is_no_run_exits_1_and_says_so(tmp_path):
    result = invoke_cli("run", "--resume", str(tmp_path))
    assert result.exit_code == 1
    assert result.stderr.strip() == f"error: {tmp_path} is not a run directory (it holds no events.jsonl)"


@pytest.mark.parametrize(
    "args",
    [
        ["gc"],
        ["images", "list"],
        ["images", "build", "policy-runtime"],
        ["env", "test", "cartpole", "-n", "1"],
        ["evaluate", str(BASELINE), "-b", "cartpole", "-n", "1"],
        ["run", "examples/cartpole.yaml", "-o", "{tmp}/run"],
        ["spec", "check", "{tmp}/command.yaml"],  # a command agent's own image can only be checked by the engine
    ],
    ids=lambda args: " ".join(args[:2]),
)
def test_infrastructure_errors_exit_3_with_one_line_and_a_json_error_under_json(args, tmp_path):
    write_spec(tmp_path, agent={"kind": "command", "image": "someone/agent:1", "argv": ["true"]}).rename(tmp_path / "command.yaml")
    args = [arg.replace("{tmp}", str(tmp_path)) for arg in args]
    result = invoke_cli(*args, env=no_engine(tmp_path))
    assert result.exit_code == 3, result.stdout + result.stderr
    assert result.stderr.strip().splitlines() == [f"error: {NO_ENGINE_MESSAGE}"]
    as_json = invoke_cli(*args, "--json", env=no_engine(tmp_path))
    assert as_json.exit_code == 3
    assert as_json.json() == {"error": {"kind": "infrastructure", "code": "engine_unavailable", "problems": [], "message": NO_ENGINE_MESSAGE},
                              "exit_code": 3}


def test_bad_input_under_json_is_a_json_error_with_exit_1(tmp_path):
    result = invoke_cli("evaluate", str(BASELINE), "-b", "pong", "--json", env=no_engine(tmp_path))
    assert result.exit_code == 1
    error = result.json()["error"]
    assert error["kind"] == "bad_input" and error["message"].startswith("unknown benchmark 'pong'")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["evaluate", "environments", "-b", "cartpole"], "has no policy.py"),
        (["evaluate", "environments/cartpole/baseline", "-b", "pong"],
         "unknown benchmark 'pong'; known: Acrobot-v1, Ant-v5, BipedalWalker-v3, CarRacing-v3, CartPole-v1"),
    ],
)
def test_bad_input_gets_one_clear_line_and_a_nonzero_exit(args, message, tmp_path):
    result = invoke_cli(*args, env=no_engine(tmp_path))
    assert result.exit_code == 1
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_no_docker_daemon_gets_one_clear_line(tmp_path):
    result = invoke_cli("evaluate", "environments/cartpole/baseline", "-b", "cartpole", env=no_engine(tmp_path))
    assert result.exit_code == 3
    assert "engine_unavailable: no Docker daemon answers" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_out_is_the_same_option_as_output_on_evaluate():
    import typer.main

    from orchestrator.cli.app import app

    evaluate = typer.main.get_command(app).commands["evaluate"]
    (output,) = [param for param in evaluate.params if "--output" in param.opts]
    assert {"--output", "--out"} <= set(output.opts)


def test_out_names_a_directory_in_every_command_and_export_writes_its_file_with_file(tmp_path):
    import typer.main

    from orchestrator.cli.app import app

    def commands(group):
        for name, command in group.commands.items():
            yield from commands(command) if hasattr(command, "commands") else [(name, command)]

    with_out = {name: param for name, command in commands(typer.main.get_command(app)) for param in command.params
                if "--out" in param.opts}
    assert {"run", "evaluate"} <= set(with_out)
    assert all((param.help or "").startswith("Directory ") for param in with_out.values()), {n: p.help for n, p in with_out.items()}

    recorded = REPO / "tests" / "data" / "records-a181597" / "run"
    assert invoke_cli("runs", "export", str(recorded), "--out", str(tmp_path / "x.jsonl")).exit_code == 2
    result = invoke_cli("runs", "export", str(recorded), "--file", str(tmp_path / "x.jsonl"), "--json")
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["file"] == str(tmp_path / "x.jsonl") and summary["records"] == len((tmp_path / "x.jsonl").read_text().splitlines())
