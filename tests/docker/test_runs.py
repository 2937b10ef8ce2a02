"""Program-evolution Runs end to end: records, the agent container's walls, resume after SIGKILL, the example."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml
from programs import STEADY
from support.cli import run_cli
from support.engine_events import ContainerCreations

from orchestrator.backends.labels import ROLE, SANDBOX, selector
from orchestrator.kernel.program import capture_program

REPO = Path(__file__).resolve().parents[2]
BASELINE = REPO / "environments" / "cartpole" / "baseline"


def write_spec(path: Path, **spec) -> Path:
    path.write_text(yaml.safe_dump(spec))
    return path


def events(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line.strip()]


SMALL = {
    "benchmark": "CartPole-v1",
    "budget": {"episodes": 24, "max_submissions": 8, "pool_size": 8},
    "validation": {"episodes": 4, "max_candidates": 2},
    "assessment": {"episodes": 4},
}


def test_scripted_run_on_cartpole_keeps_complete_records(tmp_path, write_program, engine, scope):
    """A Run whose Episodes run in forked sandboxes (the other Runs of the suite run a container per Episode)."""
    steady = write_program(STEADY)
    spec = write_spec(tmp_path / "spec.yaml", **SMALL, sandbox={"isolation": "forked"}, agent={
        "kind": "scripted",
        "steps": [{"program": str(BASELINE), "episodes": "0:4"}, {"program": str(steady), "episodes": "0:2,5"}],
        "finish": "all",
    })
    run_dir = tmp_path / "run"
    with ContainerCreations(engine.client) as created:
        result = run_cli("run", str(spec), "-o", str(run_dir), "--json", scope=scope)
    assert result.exit_code == 0, result.stderr
    manifest = json.loads(result.stdout)
    assert manifest["terminal_reason"] == "finish_called"
    steady_digest = capture_program(steady).digest
    assert manifest["final"] == {"submission_id": "s0002", "program_digest": steady_digest, "is_initial_program": False}
    assert manifest["validation"]["candidates"] == ["s0001", "s0002"]
    assert manifest["assessment"]["score"] == 500.0
    assert manifest["assessment"]["initial_program_score"] < 500.0
    assert manifest == {**json.loads((run_dir / "run.json").read_text()), "run_dir": str(run_dir)}
    # The Host keeps its own copy of the instructions, out of the agent's reach.
    told = (run_dir / "task.md").read_text()
    assert told.startswith("# ") and told == (run_dir / "workspace" / "TASK.md").read_text()

    # Provenance: what produced the Run, read from its records alone.
    assert manifest["schema"] == "epg.run/1"
    assert manifest["software"] == {"orchestrator": "0.1.0", "epg_sdk": "0.1.0", "policy_abi": "1", "python": manifest["software"]["python"]}
    assert set(manifest["images"]) == {"policy_runtime", "environment", "agent"}
    for name, entry in manifest["images"].items():
        assert entry["tag"].startswith("epg/") and entry["id"].startswith("sha256:"), name
        inspected = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", entry["tag"]], capture_output=True, text=True)
        assert inspected.stdout.strip() == entry["id"], name
    assert manifest["images"]["environment"]["tag"].startswith("epg/env-cartpole:")
    assert manifest["images"]["agent"]["tag"].startswith("epg/agent-base:")
    assert manifest["benchmark_package"] == {"name": "epg-env-cartpole", "version": "0.1.0", "image": "env-cartpole"}
    assert len(manifest["seed_key_id"]) >= 16 and "seed_key_file" in manifest
    assert manifest["started_at"] <= manifest["ended_at"] and manifest["ended_at"].endswith("Z")
    assert 0 < manifest["wall_seconds"] < 600
    assert (manifest["episodes_spent"], manifest["submissions_made"], manifest["agent_exit_code"]) == (7, 2, 0)
    assert manifest["phase"] == "done"
    assert all(e["schema"] == "epg.event/1" for e in events(run_dir))

    expected = {"s0001": (capture_program(BASELINE).digest, "0:4", 4), "s0002": (steady_digest, "0:2,5", 3)}
    for submission_id, (digest, selector_text, count) in expected.items():
        record = json.loads((run_dir / "submissions" / submission_id / "record.json").read_text())
        assert (record["schema"], record["feedback"]["schema"]) == ("epg.submission/1", "epg.feedback/1")
        assert (record["program_digest"], record["selector"], len(record["indices"])) == (digest, selector_text, count)
        published = json.loads((run_dir / "workspace" / "feedback" / submission_id / "feedback.json").read_text())
        assert published == record["feedback"]
        assert [e["index"] for e in published["episodes"]] == record["indices"]
        assert (run_dir / "programs" / digest.removeprefix("sha256:") / "policy.py").exists()
    assert json.loads((run_dir / "validation.json").read_text())["selected"] == "s0002"
    assert json.loads((run_dir / "validation.json").read_text())["schema"] == "epg.validation/1"
    assessment = json.loads((run_dir / "assessment.json").read_text())
    assert assessment["schema"] == "epg.assessment/1"
    assert len(assessment["episodes"]) == 4 and assessment["program_digest"] == steady_digest
    kinds = [e["type"] for e in events(run_dir)]
    for kind in ("created", "agent_started", "submission_admitted", "submission_completed", "finished", "validation_done", "assessment_done"):
        assert kind in kinds
    assert (run_dir / "private" / "pool.json").exists()
    assert (run_dir / "workspace" / "TASK.md").read_text().count("0:8,12,20:24") == 1
    assert "s0001" in (run_dir / "agent" / "stdout.log").read_text()
    shown = run_cli("runs", "show", str(run_dir), scope=scope)
    assert shown.exit_code == 0 and "s0002" in shown.stdout and "0:2,5" in shown.stdout
    shown_json = json.loads(run_cli("runs", "show", str(run_dir), "--json", scope=scope).stdout)
    assert [s["id"] for s in shown_json["submissions"]] == ["s0001", "s0002"] and shown_json["manifest"]["phase"] == "done"
    listed = run_cli("runs", "list", str(tmp_path), scope=scope)
    assert listed.exit_code == 0 and "run" in listed.stdout and "finish_called" in listed.stdout
    (row,) = json.loads(run_cli("runs", "list", str(tmp_path), "--json", scope=scope).stdout)["runs"]
    assert (row["run"], row["terminal_reason"], row["assessment_score"], row["error"]) == ("run", "finish_called", 500.0, None)
    # Hidden material never reaches the agent's side.
    pool_payloads = [p["payload"] for p in json.loads((run_dir / "private" / "pool.json").read_text())]
    workspace_text = "".join(p.read_text(errors="replace") for p in (run_dir / "workspace").rglob("*") if p.is_file())
    assert not any(payload in workspace_text for payload in pool_payloads)
    # Forked: a lane container held the sandboxes, no policy container was started, and nothing is left.
    (sandbox_id,) = {e["sandbox"] for e in events(run_dir) if e["type"] == "started"}
    roles = sorted(e["Actor"]["Attributes"][ROLE] for e in created.labelled(**{SANDBOX: sandbox_id}))
    assert "lane" in roles and "runner" in roles and "policy" not in roles, roles
    assert engine.client.containers.list(all=True, filters={"label": selector(scope=scope)}, sparse=True) == []


AGENT_PROBE = r'''
import json, os, socket, subprocess
facts = {}
facts["interfaces"] = sorted(os.listdir("/sys/class/net"))
facts["routes"] = [l.split()[0] for l in open("/proc/net/route").read().splitlines()[1:] if l.strip()]
try:
    socket.getaddrinfo("example.invalid", 80)
    facts["resolver"] = True
except OSError:
    facts["resolver"] = False
facts["docker_socket"] = any(os.path.exists(p) for p in ("/var/run/docker.sock", "/run/docker.sock"))
for module in ("gymnasium", "epg_env_cartpole", "epg_sdk", "epg_sdk.runtime.runner"):
    try:
        __import__(module)
        facts[module] = True
    except ImportError:
        facts[module] = False
facts["private_visible"] = any(os.path.exists(p) for p in ("/workspace/private", "/workspace/../private", "/epg/private", "/run/private"))
search = "grep -rl policy_seed / --include=*.json 2>/dev/null | grep -v ^/proc | head -1"
facts["pool_anywhere"] = subprocess.run(["sh", "-c", search], capture_output=True, text=True).stdout.strip()
try:
    open("/workspace/feedback/x", "w").write("x")
    facts["feedback_writable"] = True
except OSError:
    facts["feedback_writable"] = False
open("/workspace/program/scratch.txt", "w").write("ok")
facts["program_writable"] = True
facts["uid"] = os.getuid()
facts["kernel"] = os.uname().release
facts["status"] = json.loads(subprocess.run(["epg-session", "status"], capture_output=True, text=True).stdout)["pool_size"]
json.dump(facts, open("/workspace/analysis/facts.json", "w"))
'''


@pytest.mark.parametrize("runtime", ["runc", "runsc"])
def test_agent_container_has_only_the_host_api(tmp_path, scope, runtime):
    spec = write_spec(tmp_path / "spec.yaml", **SMALL, sandbox={"runtime": runtime},
                      agent={"kind": "command", "image": "agent-base", "argv": ["python3", "-c", AGENT_PROBE]})
    run_dir = tmp_path / "run"
    result = run_cli("run", str(spec), "-o", str(run_dir), "--json", scope=scope)
    assert result.exit_code == 0, result.stderr
    facts = json.loads((run_dir / "workspace" / "analysis" / "facts.json").read_text())
    assert facts["interfaces"] == ["lo"] and facts["routes"] == [] and facts["resolver"] is False
    assert facts["docker_socket"] is False
    assert not any(facts[m] for m in ("gymnasium", "epg_env_cartpole", "epg_sdk", "epg_sdk.runtime.runner"))
    assert facts["private_visible"] is False and facts["pool_anywhere"] == ""
    assert facts["feedback_writable"] is False and facts["program_writable"] is True
    assert facts["uid"] != 0
    assert facts["status"] == 8  # the Host API is reachable through epg-session
    # Under gVisor the agent talks to its Sentry, which reports its own kernel release.
    assert (facts["kernel"] == os.uname().release) is (runtime == "runc")
    manifest = json.loads(result.stdout)
    assert manifest["terminal_reason"] == "exited_without_finish" and manifest["final"] is None


def test_killed_run_resumes_without_spending_an_episode_twice(tmp_path, write_program, engine, scope):
    steps = [{"program": str(BASELINE), "episodes": "0:4"} for _ in range(5)]
    spec = write_spec(tmp_path / "spec.yaml", **{**SMALL, "budget": {"episodes": 40, "max_submissions": 8, "pool_size": 8}},
                      agent={"kind": "scripted", "steps": steps, "finish": "all"})
    run_dir = tmp_path / "run"
    process = subprocess.Popen(
        [sys.executable, "-m", "orchestrator.cli.app", "run", str(spec), "-o", str(run_dir), "--json"],
        env={**os.environ, "EPG_SCOPE": scope}, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if (run_dir / "events.jsonl").exists() and sum(e["type"] == "submission_completed" for e in events(run_dir)) >= 2:
            break
        time.sleep(0.1)
    process.send_signal(signal.SIGKILL)
    process.wait()
    before = events(run_dir)
    completed_before = {e["id"] for e in before if e["type"] == "submission_completed"}
    assert len(completed_before) >= 2
    owner = next(e["owner"] for e in before if e["type"] == "started")
    left = engine.client.containers.list(all=True, filters={"label": selector(owner=owner)}, sparse=True)
    assert {c.attrs["Labels"]["org.evopolicygym.role"] for c in left} >= {"runner", "policy"}, "the killed run left its containers"
    work_dirs = list(Path(tempfile.gettempdir()).glob(f"epg-sandbox-{process.pid}-*"))
    assert work_dirs and all((d / "lane0" / "runner.sock").exists() for d in work_dirs), "the killed run left its work directory"

    result = run_cli("run", "--resume", str(run_dir), "--json", scope=scope)
    assert result.exit_code == 0, result.stderr
    manifest = json.loads(result.stdout)
    after = events(run_dir)
    completed = [e for e in after if e["type"] == "submission_completed"]
    voided = {e["id"] for e in after if e["type"] == "submission_voided"}
    admitted = {e["id"]: e for e in after if e["type"] == "submission_admitted"}
    # Five scripted Submissions of four Episodes completed, each exactly once.
    assert len(completed) == 5 and len({e["id"] for e in completed}) == 5
    spent = sum(len(admitted[e["id"]]["indices"]) for e in completed)
    assert spent == 20
    assert set(admitted) == {e["id"] for e in completed} | voided
    # Nothing published before the kill was lost, and the agent was restarted with its workspace.
    for submission_id in completed_before:
        assert (run_dir / "workspace" / "feedback" / submission_id / "feedback.json").exists()
    assert [e["attempt"] for e in after if e["type"] == "agent_started"] == [1, 2]
    assert manifest["terminal_reason"] == "finish_called" and manifest["phase"] == "done"
    assert engine.client.containers.list(all=True, filters={"label": selector(owner=owner)}, sparse=True) == []
    assert not any(d.exists() for d in work_dirs), "the resumed run (or another's start) reaped the dead one's work directory"


def test_the_published_rule_validates_every_completed_submission_and_breaks_a_tie_to_the_latest(tmp_path, write_program, scope):
    steady = write_program(STEADY)
    protocol = {**SMALL, "benchmark": "cartpole", "validation": {"episodes": 3, "max_candidates": 1, "candidates": "all_completed"},
                "assessment": {"episodes": 2, "include_initial_program": False}}
    spec = write_spec(tmp_path / "spec.yaml", **protocol, agent={
        "kind": "scripted",
        "steps": [{"program": str(steady), "episodes": "0:2"}, {"program": str(BASELINE), "episodes": "0:2"},
                  {"program": str(steady), "episodes": "2:4"}],
        "finish": ["s0001"],  # the agent's choice does not count under this rule
    })
    run_dir = tmp_path / "run"
    result = run_cli("run", str(spec), "-o", str(run_dir), "--json", scope=scope)
    assert result.exit_code == 0, result.stderr
    manifest = json.loads(result.stdout)
    assert manifest["validation"]["candidates"] == ["s0003", "s0002", "s0001"]
    assert manifest["validation"]["rule"] == "all completed Submissions, ties to the latest"
    scores = manifest["validation"]["scores"]
    assert scores["s0001"] == scores["s0003"] == 500.0 and scores["s0002"] < 500.0
    assert manifest["final"]["submission_id"] == "s0003"
    assert manifest["benchmark"] == "CartPole-v1"  # the id the alias resolved to
    assert "Every completed Submission is then" in (run_dir / "workspace" / "TASK.md").read_text()
