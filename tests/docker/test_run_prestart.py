"""Containers pre-started during the agent phase for the Validation and Assessment Episodes: used once each, bounded."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from support.cli import run_cli

from orchestrator.run import workspace_fs

REPO = Path(__file__).resolve().parents[2]

# Each Episode's container says who it is (its PID and mount namespaces, and the start of its first process
# in clock ticks: no two containers alive at once share a namespace, and a recycled one starts later) and when
# that first process started (wall time, from the kernel's boot time).
WHOAMI = '''
import os

def _started() -> float:
    boot = next(float(line.split()[1]) for line in open("/proc/stat") if line.startswith("btime "))
    ticks = float(open("/proc/1/stat").read().rsplit(")", 1)[1].split()[19])
    return boot + ticks / os.sysconf("SC_CLK_TCK")

class Policy:
    def act(self, observation):
        return 1 if observation[2] + 0.5 * observation[3] > 0 else 0

def _identity() -> str:
    ticks = open("/proc/1/stat").read().rsplit(")", 1)[1].split()[19]
    return "/".join([os.readlink("/proc/1/ns/pid"), os.readlink("/proc/1/ns/mnt"), ticks])

def make_policy(context):
    print(f"container {_identity()} started {_started():.2f}", flush=True)
    return Policy()
'''


def whoami_program(tmp_path: Path) -> Path:
    """The Program whose Episodes print which container they ran in and when it started (WHOAMI), in tmp_path/whoami."""
    program = tmp_path / "whoami"
    program.mkdir()
    (program / "policy.py").write_text(WHOAMI)
    return program


def containers_of(document: dict) -> list[tuple[str, float]]:
    found = []
    for episode in document["episodes"]:
        line = next(line for line in episode["output_tail"].splitlines() if line.startswith("container "))
        _, name, _, started = line.split()
        found.append((name, float(started)))
    return found


def test_validation_and_assessment_run_in_containers_prestarted_during_the_agent_phase_each_used_once(tmp_path, scope, engine):
    program = whoami_program(tmp_path)
    # 2 candidates x 8 Validation Episodes + 8 Assessment Episodes x 2 Programs = 32 follow the agent phase;
    # the memory budget allows 20 (at 18 MiB each), and no idle pool is kept (pool_size 0).
    spec = {
        "benchmark": "CartPole-v1", "seed": 0, "initial_program": str(program),
        "budget": {"episodes": 12, "max_submissions": 3, "pool_size": 12},
        "validation": {"episodes": 8, "max_candidates": 2},
        "assessment": {"episodes": 8, "include_initial_program": True},
        "sandbox": {"pool_size": 0, "prestart_memory_mib": 20 * 18},
        "agent": {"kind": "scripted", "steps": [{"program": str(program), "episodes": s} for s in ("0:4", "4:8", "8:12")],
                  "finish": ["s0001", "s0002"]},
    }
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    run_dir = tmp_path / "run"
    result = run_cli("run", str(tmp_path / "spec.yaml"), "-o", str(run_dir), "--json", scope=scope, timeout=900)
    assert result.exit_code == 0, result.stderr[-4000:]
    manifest = json.loads(result.stdout)
    assert manifest["terminal_reason"] == "finish_called" and manifest["phase"] == "done"

    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    prestarts = [(e["phase"], e["target"]) for e in events if e["type"] == "prestart"]
    assert prestarts == [("agent", 20), ("validation", 20), ("assessment", 16)]
    agent_ended = next(e["time"] for e in events if e["type"] == "agent_phase_ended")

    train = [c for sid in ("s0001", "s0002", "s0003")
             for c in containers_of(json.loads((run_dir / "submissions" / sid / "record.json").read_text())["feedback"])]
    validation = json.loads((run_dir / "validation.json").read_text())
    held_out = [c for result_row in validation["results"] for c in containers_of(result_row["feedback"])]
    assessment = json.loads((run_dir / "assessment.json").read_text())
    held_out += containers_of(assessment) + containers_of(assessment["initial_program"])
    assert len(train) == 12 and len(held_out) == 32
    # One container per Episode, whatever started it: no two Episodes of the Run share one.
    names = [name for name, _ in train + held_out]
    assert len(set(names)) == len(names) == 44
    # Some held-out Episodes ran in containers started while the agent was still at work, never more than the bound.
    early = [started for _, started in held_out if started < agent_ended]
    print(f"{len(early)} of {len(held_out)} held-out Episodes ran in containers started during the agent phase")
    assert 1 <= len(early) <= 20, (len(early), agent_ended, sorted(s for _, s in held_out)[:5])

    owner = next(e["owner"] for e in events if e["type"] == "started")
    left = engine.client.containers.list(all=True, filters={"label": f"org.evopolicygym.owner={owner}"}, sparse=True)
    assert left == [], "the Run left containers behind"


def _policy_containers(engine, owner: str) -> list:
    return engine.client.containers.list(all=True, filters={"label": [f"org.evopolicygym.owner={owner}", "org.evopolicygym.role=policy"]},
                                         sparse=True)


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_a_run_killed_in_its_agent_phase_leaves_no_prestarted_container(tmp_path, scope, engine, how):
    """SIGTERM: the Run removes its containers on the way out. SIGKILL: nothing can, until `gc` reaps them (here by this
    test run's scope label; reaping the leftovers of dead owners is tests/docker/test_cleanup.py's)."""
    program = whoami_program(tmp_path)
    spec = {
        "benchmark": "CartPole-v1", "seed": 0, "initial_program": str(program),
        "budget": {"episodes": 8, "max_submissions": 2, "pool_size": 8},
        "validation": {"episodes": 8, "max_candidates": 1},
        "assessment": {"episodes": 8},
        "sandbox": {"pool_size": 0, "prestart_memory_mib": 12 * 18},
        "agent": {"kind": "command", "image": "agent-base", "argv": ["sh", "-c", "epg-session submit --episodes 0:4 && sleep 600"]},
    }
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    run_dir = tmp_path / "run"
    process = subprocess.Popen([sys.executable, "-m", "orchestrator.cli.app", "run", str(tmp_path / "spec.yaml"), "-o", str(run_dir)],
                               env={**os.environ, "EPG_SCOPE": scope}, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline, owner, idle = time.monotonic() + 300, "", []
        while time.monotonic() < deadline and process.poll() is None:
            events = run_dir / "events.jsonl"
            lines = [json.loads(line) for line in events.read_text().splitlines()] if events.exists() else []
            owner = next((e["owner"] for e in lines if e["type"] == "started"), "")
            done = any(e["type"] == "submission_completed" for e in lines)
            idle = [c for c in _policy_containers(engine, owner) if c.status == "running"] if owner else []
            if done and len(idle) >= 12:  # the Submission's 4 Episodes ran; the 16 held-out ones are pre-starting
                break
            time.sleep(0.2)
        assert process.poll() is None and len(idle) >= 12, (process.poll(), len(idle), process.stderr.read()[-2000:] if process.poll() else "")
        process.send_signal(getattr(signal, how))
        process.wait(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    if how == "SIGKILL":
        assert _policy_containers(engine, owner), "SIGKILL leaves the containers for gc"
        # gc of this test run's scope only: a bare gc would also reap the dead owners of tests running beside this one
        result = run_cli("gc", "--scope", scope, scope=scope, timeout=900)
        assert result.exit_code == 0, result.stderr
        workspace_fs.release(run_dir / "workspace")  # what `run --resume` would mount again
    else:
        assert process.returncode == 130, process.stderr.read()[-2000:]
        assert not workspace_fs.is_mounted(run_dir / "workspace"), "the stopped Run left its workspace mounted"
    left = engine.client.containers.list(all=True, filters={"label": f"org.evopolicygym.owner={owner}"}, sparse=True)
    assert left == [], f"{how}: the Run left {len(left)} containers behind"
