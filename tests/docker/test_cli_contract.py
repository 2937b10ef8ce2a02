"""The CLI as scripts drive it: one JSON object per command under --json, one exit-code scheme, readers that survive bad records.

Exit codes: 0 ok, 1 bad input (or a failed check), 2 usage, 3 infrastructure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
BASELINE = REPO / "environments" / "cartpole" / "baseline"


def cli(*args: str, env: dict[str, str] | None = None, scope: str = "", cwd: Path = REPO) -> subprocess.CompletedProcess:
    environment = {**os.environ, "EPG_SCOPE": scope, **(env or {})}
    return subprocess.run([sys.executable, "-m", "orchestrator.cli.app", *args], capture_output=True, text=True, env=environment,
                          cwd=cwd, timeout=600, check=False)


def json_of(result: subprocess.CompletedProcess) -> dict:
    """The one JSON object a command printed on stdout."""
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1, result.stdout[-2000:] + result.stderr[-2000:]
    document = json.loads(lines[0])
    assert isinstance(document, dict)
    return document


def no_engine(tmp_path: Path) -> dict[str, str]:
    return {"DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"}


def write_spec(directory: Path, **fields) -> Path:
    spec = {"benchmark": "CartPole-v1", "agent": {"kind": "hill-climb"}, **fields}
    path = directory / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


# --version and --json per command ---------------------------------------------------------------

def test_version_names_the_orchestrator_sdk_and_abi():
    result = cli("--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("epg-orchestrate 0.1.0 (epg-sdk 0.1.0, policy ABI 1, Python 3.")


def test_spec_check_json_of_a_valid_spec():
    document = json_of(result := cli("spec", "check", "examples/cartpole.yaml", "--json"))
    assert result.returncode == 0
    assert document == {"spec": "examples/cartpole.yaml", "valid": True, "problems": [], "benchmark": "CartPole-v1",
                        "agent": "hill-climb", "episodes": 96, "submissions": 12, "relay": []}


def test_spec_schema_is_the_json_schema_of_specs():
    result = cli("spec", "schema")
    assert result.returncode == 0
    schema = json.loads(result.stdout)
    assert schema["title"] == "RunSpec" and "benchmark" in schema["required"]


def test_benchmarks_json_names_each_benchmark_with_its_package_and_version():
    result = cli("benchmarks", "--json")
    assert result.returncode == 0, result.stderr
    rows = {row["id"]: row for row in json_of(result)["benchmarks"]}
    assert rows["CartPole-v1"] | {"package": ""} == {
        "id": "CartPole-v1", "entry": "epg_env_cartpole:make_benchmark", "aliases": ["cartpole"], "image": "env-cartpole",
        "package": "", "distribution": "epg-env-cartpole", "version": "0.1.0",
    }
    assert {"Acrobot-v1", "MountainCarContinuous-v0"} <= set(rows)


def test_images_list_json_gives_each_image_its_tag_state_and_size(images, engine):
    result = cli("images", "list", "--json")
    assert result.returncode == 0, result.stderr
    listed = {row["name"]: row for row in json_of(result)["images"]}
    runtime = listed["policy-runtime"]
    assert runtime == {"name": "policy-runtime", "tag": images["policy-runtime"], "present": True, "pinned": None, "size_bytes": runtime["size_bytes"]}
    assert runtime["size_bytes"] == engine.client.images.get(images["policy-runtime"]).attrs["Size"] > 50 * 2**20
    assert listed["env-cartpole"]["tag"] == images["env-cartpole"] and listed["env-cartpole"]["present"] is True
    assert listed["agent-codex"]["pinned"].startswith("codex ")
    # The disk of the built images together: their shared layers (the base, at least) once, so less than the sum of sizes.
    built = [row for row in listed.values() if row["present"]]
    disk = json_of(result)["disk_bytes"]
    base = engine.client.images.get(images["policy-runtime"]).history()[-1]["Size"]
    assert max(row["size_bytes"] for row in built) <= disk <= sum(row["size_bytes"] for row in built) - (len(built) - 1) * base


def test_images_prune_json_lists_what_it_removed(images, engine):
    result = cli("images", "prune", "--json", "--environments", "tests/environments")
    assert result.returncode == 0, result.stderr
    removed = json_of(result)["removed"]
    assert isinstance(removed, list) and images["policy-runtime"] not in removed and images["env-probe"] not in removed
    assert all(engine.image_exists(tag) for tag in images.values())


def test_gc_json_counts_what_it_reaped(scope):
    result = cli("gc", "--scope", scope + "-nothing", "--json")
    assert result.returncode == 0, result.stderr
    assert json_of(result) == {"containers": 0, "networks": 0, "volumes": 0, "errors": []}


def test_env_new_json_names_the_package_it_made(tmp_path):
    result = cli("env", "new", str(tmp_path / "pendulum"), "--gymnasium", "Pendulum-v1", "--json")
    assert result.returncode == 0, result.stderr
    assert json_of(result) == {"root": str(tmp_path / "pendulum"), "benchmark_id": "Pendulum-v1", "image": "env-pendulum"}
    assert (tmp_path / "pendulum" / "pyproject.toml").is_file()


def test_evaluate_json_and_evaluation_json_carry_their_provenance(scope, tmp_path, images):
    result = cli("evaluate", str(BASELINE), "-b", "cartpole", "-n", "2", "--json", "--output", str(tmp_path / "out"), scope=scope)
    assert result.returncode == 0, result.stderr
    document = json_of(result)
    assert document == json.loads((tmp_path / "out" / "evaluation.json").read_text())
    assert document["schema"] == "epg.evaluation/1"
    assert json.loads((tmp_path / "out" / "feedback.json").read_text())["schema"] == "epg.feedback/1"
    assert document["software"]["orchestrator"] == "0.1.0" and document["software"]["epg_sdk"] == "0.1.0"
    assert document["images"]["policy_runtime"]["tag"] == images["policy-runtime"]
    assert document["images"]["environment"]["tag"] == images["env-cartpole"]
    assert all(entry["id"].startswith("sha256:") for entry in document["images"].values())
    assert document["benchmark_package"] == {"name": "epg-env-cartpole", "version": "0.1.0", "image": "env-cartpole"}
    assert document["episodes_run"] == 2 and document["wall_seconds"] > 0
    assert document["started_at"] <= document["ended_at"] and document["ended_at"].endswith("Z")


def test_out_is_the_same_option_as_output(scope, tmp_path, images):
    result = cli("evaluate", str(BASELINE), "-b", "cartpole", "-n", "1", "--out", str(tmp_path), scope=scope)
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "feedback.json").read_text())["schema"] == "epg.feedback/1"


# spec check: everything run checks before starting --------------------------------------------

@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"benchmark": "NoSuchBench"}, "benchmark: unknown benchmark 'NoSuchBench'"),
        ({"initial_program": "missing"}, "initial_program: "),
        ({"agent": {"kind": "scripted", "steps": [{"program": "nowhere", "episodes": "0:2"}]}}, "agent.steps.0.program: "),
        ({"seed_key_file": "no.key"}, "seed_key_file: "),
        ({"agent": {"kind": "codex", "model": "m"}, "relay": {"credential_env": "EPG_TEST_UNSET_CREDENTIAL"}},
         "relay.credential_env: the spec sends EPG_TEST_UNSET_CREDENTIAL to api.openai.com (EPG_TEST_UNSET_CREDENTIAL is not"),
        ({"agent": {"kind": "command", "image": "epg-test/no-such-image:0", "argv": ["true"]}},
         "agent.image: the engine has no image 'epg-test/no-such-image:0'"),
        ({"budget": {"episodes": 0}}, "budget.episodes: Input should be greater than or equal to 1"),
    ],
    ids=["benchmark", "initial_program", "scripted_step", "seed_key", "credential", "agent_image", "field"],
)
def test_spec_check_reports_what_run_would_refuse_as_field_path_and_reason(tmp_path, fields, problem):
    spec = write_spec(tmp_path, **fields)
    text = cli("spec", "check", str(spec), env={"EPG_TEST_UNSET_CREDENTIAL": ""})
    assert text.returncode == 1
    assert f"{spec}: {problem}" in text.stderr and "Traceback" not in text.stderr
    document = json_of(result := cli("spec", "check", str(spec), "--json", env={"EPG_TEST_UNSET_CREDENTIAL": ""}))
    assert result.returncode == 1 and document["valid"] is False
    assert any(line.startswith(problem) for line in document["problems"]), document["problems"]
    # run refuses the same spec before starting anything, with the same line.
    refused = cli("run", str(spec), "-o", str(tmp_path / "run"), env={"EPG_TEST_UNSET_CREDENTIAL": ""})
    assert refused.returncode == 1 and problem in refused.stderr and "Traceback" not in refused.stderr
    assert not (tmp_path / "run").exists()


def test_spec_check_gives_a_yaml_error_as_line_and_column(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text("benchmark: CartPole-v1\nagent: {kind: hill-climb\nbudget: 3\n")
    result = cli("spec", "check", str(spec))
    assert result.returncode == 1
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
def test_usage_errors_exit_2(args):
    result = cli(*args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr


def test_resume_of_a_directory_that_is_no_run_exits_1_and_says_so(tmp_path):
    result = cli("run", "--resume", str(tmp_path))
    assert result.returncode == 1
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
    result = cli(*args, env=no_engine(tmp_path))
    assert result.returncode == 3, result.stdout + result.stderr
    assert result.stderr.strip().splitlines() == [
        "error: engine_unavailable: no Docker daemon answers; start one with `make docker` (scripts/ensure-docker.sh)"]
    as_json = cli(*args, "--json", env=no_engine(tmp_path))
    assert as_json.returncode == 3
    assert json_of(as_json) == {"error": {"kind": "infrastructure", "code": "engine_unavailable", "problems": [],
                                          "message": "engine_unavailable: no Docker daemon answers; start one with `make docker` "
                                                     "(scripts/ensure-docker.sh)"}, "exit_code": 3}


def test_bad_input_under_json_is_a_json_error_with_exit_1():
    result = cli("evaluate", str(BASELINE), "-b", "pong", "--json")
    assert result.returncode == 1
    error = json_of(result)["error"]
    assert error["kind"] == "bad_input" and error["message"].startswith("unknown benchmark 'pong'")


# readers of records survive partial and corrupt files ------------------------------------------------

def make_runs(root: Path) -> None:
    good = root / "good"
    (good / "submissions" / "s0001").mkdir(parents=True)
    (good / "run.json").write_text(json.dumps({"schema": "epg.run/1", "benchmark": "CartPole-v1", "agent": "scripted", "phase": "done",
                                               "terminal_reason": "finished", "assessment": {"score": 12.5},
                                               "final": {"submission_id": "s0001", "program_digest": "sha256:ab"},
                                               "validation": {"scores": {"s0001": 11.0}}}))
    (good / "submissions" / "s0001" / "record.json").write_text(json.dumps({
        "schema": "epg.submission/1", "id": "s0001", "selector": "0:4", "program_digest": "sha256:" + "ab" * 32,
        "feedback": {"score": 9.5, "episodes": [{"failure": None}, {"failure": "timeout"}]}}))
    (good / "submissions" / "s0002").mkdir()
    (good / "submissions" / "s0002" / "record.json").write_text(json.dumps({"schema": "epg.submission/1", "id": "s0002", "selector": "4:8"}))
    (good / "submissions" / "s0003").mkdir()
    (good / "submissions" / "s0003" / "record.json").write_text('{"id": "s0003", "feedb')
    (good / "submissions" / "s0004").mkdir()
    (good / "submissions" / "s0004" / "record.json").write_text(json.dumps({"id": "s0004", "feedback": {"score": "high", "episodes": []}}))
    (root / "corrupt").mkdir()
    (root / "corrupt" / "run.json").write_text('{"benchmark": "CartPole-v1", "pha')
    (root / "list").mkdir()
    (root / "list" / "run.json").write_text("[1, 2]")
    (root / "started").mkdir()
    (root / "started" / "events.jsonl").write_text("")
    (root / "foreign").mkdir()
    (root / "foreign" / "run.json").write_text(json.dumps({"schema": "epg.evaluation/1"}))
    (root / "not-a-run").mkdir()


def test_runs_list_marks_unreadable_run_directories_and_lists_the_rest(tmp_path):
    make_runs(tmp_path)
    result = cli("runs", "list", str(tmp_path), "--json")
    assert result.returncode == 0, result.stderr
    rows = {row["run"]: row for row in json_of(result)["runs"]}
    assert set(rows) == {"good", "corrupt", "list", "started", "foreign"}
    assert rows["good"]["error"] is None and rows["good"]["assessment_score"] == 12.5 and rows["good"]["phase"] == "done"
    assert rows["corrupt"]["error"].startswith("not JSON (1:")
    assert rows["list"]["error"] == "not a JSON object but a list"
    assert rows["started"]["error"] == "no run.json yet (a Run that never started)"
    assert rows["foreign"]["error"] == "schema 'epg.evaluation/1', expected 'epg.run/1'"
    text = cli("runs", "list", str(tmp_path))
    assert text.returncode == 0 and "Traceback" not in text.stderr
    assert "unreadable: not JSON" in text.stdout and "12.500" in text.stdout


def test_runs_show_marks_partial_and_corrupt_records(tmp_path):
    make_runs(tmp_path)
    result = cli("runs", "show", str(tmp_path / "good"), "--json")
    assert result.returncode == 0, result.stderr
    document = json_of(result)
    assert document["manifest"]["terminal_reason"] == "finished"
    rows = {row["id"]: row for row in document["submissions"]}
    assert rows["s0001"] == {"id": "s0001", "selector": "0:4", "score": 9.5, "policy_failures": 1,
                             "program_digest": "sha256:" + "ab" * 32, "error": None}
    assert rows["s0002"] == {"id": "s0002", "error": "partial record: no 'feedback'"}
    assert rows["s0003"]["error"].startswith("not JSON (1:")
    assert rows["s0004"]["error"].startswith("malformed record: ")
    text = cli("runs", "show", str(tmp_path / "good"))
    assert text.returncode == 0 and "Traceback" not in text.stderr
    assert "unreadable: partial record" in text.stdout and "assessment score: 12.5000" in text.stdout


@pytest.mark.parametrize(
    ("directory", "message"),
    [("corrupt", "run.json: not JSON (1:"), ("list", "run.json: not a JSON object but a list"),
     ("not-a-run", "is not a run directory (it holds no run.json)")],
)
def test_runs_show_of_an_unreadable_run_is_one_line_and_exit_1(tmp_path, directory, message):
    make_runs(tmp_path)
    result = cli("runs", "show", str(tmp_path / directory))
    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: ") and message in line


def test_resume_of_a_run_with_a_corrupt_run_json_exits_1(tmp_path):
    make_runs(tmp_path)
    run_dir = tmp_path / "corrupt"
    (run_dir / "events.jsonl").write_text("")
    (run_dir / "spec.yaml").write_text(yaml.safe_dump({"benchmark": "CartPole-v1", "agent": {"kind": "hill-climb"}}))
    result = cli("run", "--resume", str(run_dir))
    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()
    assert "run.json: not JSON (1:" in line


def test_images_list_never_makes_a_missing_base(engine):
    result = cli("images", "list", "--base", "epg-test/no-such-base:0", "--json")
    assert result.returncode == 0, result.stderr
    listed = json_of(result)["images"]
    assert {row["name"] for row in listed} >= {"policy-runtime", "env-cartpole", "agent-base"}
    assert all(row["tag"] is None and row["present"] is False and row["size_bytes"] == 0 for row in listed)
    assert "pulling" not in result.stderr and "bootstrapping" not in result.stderr
    assert not engine.image_exists("epg-test/no-such-base:0")
