"""The agent reads, and cannot change, what the Host publishes for it while the Host runs as root."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
import yaml
from support.cli import run_cli

REPO = Path(__file__).resolve().parents[2]

READER = r'''
import errno, json, os, subprocess
submit = subprocess.run(["epg-session", "submit", "--episodes", "0:2"], capture_output=True, text=True)
paths = {"feedback": "feedback/s0001/feedback.json", "task": "TASK.md", "artifact": "feedback/s0001/artifacts/episodes.csv"}
report = {"uid": os.getuid(), "submit": json.loads(submit.stdout), "read": {}, "read_errors": {}, "writes": {}}
for name, path in paths.items():
    try:
        report["read"][name] = open(path).read()
    except OSError as exc:
        report["read_errors"][name] = errno.errorcode[exc.errno]

def attempt(action):
    try:
        action()
        return "succeeded"
    except OSError as exc:
        return errno.errorcode[exc.errno]

for name, path in paths.items():
    report["writes"][name] = {
        "append": attempt(lambda: open(path, "a").write("tampered")),
        "truncate": attempt(lambda: os.truncate(path, 0)),
        "chmod": attempt(lambda: os.chmod(path, 0o666)),
        "unlink": attempt(lambda: os.unlink(path)),
        "create_beside": attempt(lambda: open(os.path.join(os.path.dirname(path) or ".", "forged.json"), "x").close()),
    }
json.dump(report, open("analysis/read.json", "w"))
'''


def test_agent_reads_but_cannot_change_its_feedback_and_task_when_the_host_is_root(tmp_path, scope):
    if os.geteuid() != 0:
        pytest.fail("this test checks the Host running as root; run it as root (as CI does)", pytrace=False)
    spec = {
        "benchmark": "CartPole-v1",
        "budget": {"episodes": 4, "max_submissions": 2, "pool_size": 4},
        "validation": {"episodes": 2, "max_candidates": 1},
        "assessment": {"episodes": 2},
        "agent": {"kind": "command", "image": "agent-base", "argv": ["python3", "-c", READER]},
    }
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    run_dir = tmp_path / "run"
    result = run_cli("run", str(tmp_path / "spec.yaml"), "-o", str(run_dir), "--json", scope=scope)
    assert result.exit_code == 0, result.stderr[-3000:]
    report_path = run_dir / "workspace" / "analysis" / "read.json"
    assert report_path.exists(), (run_dir / "agent" / "stderr.log").read_text()[-3000:]
    report = json.loads(report_path.read_text())
    assert report["uid"] == 10001

    record = json.loads((run_dir / "submissions" / "s0001" / "record.json").read_text())
    published = run_dir / "workspace" / "feedback" / "s0001"
    assert report["read_errors"] == {}
    # What the agent read is what the Host recorded, and the receipt agrees with it.
    assert json.loads(report["read"]["feedback"]) == record["feedback"]
    assert report["submit"]["score"] == record["feedback"]["score"]
    assert report["submit"]["feedback_path"] == "feedback/s0001/feedback.json"
    assert record["feedback"]["artifacts"] == ["episodes.csv"]
    assert report["read"]["artifact"].encode() == (run_dir / "submissions" / "s0001" / "artifacts" / "episodes.csv").read_bytes()
    assert report["read"]["task"] == (run_dir / "workspace" / "TASK.md").read_text()
    assert report["read"]["task"].startswith("# Task: improve a policy for CartPole-v1")

    # Every attempt to change them failed, and nothing changed on the Host's side.
    for name, attempts in report["writes"].items():
        assert set(attempts.values()) <= {"EACCES", "EPERM", "EROFS"}, (name, attempts)
    assert json.loads((published / "feedback.json").read_text()) == record["feedback"]
    assert (run_dir / "workspace" / "TASK.md").read_text() == report["read"]["task"]
    assert not (published / "forged.json").exists() and not (run_dir / "workspace" / "forged.json").exists()

    # The published records are root's, readable by all and writable by none but root.
    for path, mode in ((published / "feedback.json", 0o644), (published / "artifacts" / "episodes.csv", 0o644),
                       (run_dir / "workspace" / "TASK.md", 0o644), (published, 0o755), (published / "artifacts", 0o755)):
        status = os.lstat(path)
        assert (stat.S_IMODE(status.st_mode), status.st_uid) == (mode, 0), path
