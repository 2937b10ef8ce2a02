"""A Run on MuJoCo's Reacher-v5 end to end: the package's Feedback, the Run's records, and no hidden Episode on the agent's side."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from PIL import Image

from orchestrator.kernel.program import capture_program

REPO = Path(__file__).resolve().parents[2]
MUJOCO = REPO / "environments" / "mujoco"
BASELINE, RANDOM = MUJOCO / "baseline", MUJOCO / "random"
END_CAUSES = {"time_limit", "unhealthy", "policy_failure"}
HORIZON = 50
TRACE_LIMIT_CHARS = 2000


def run_cli(args: list[str], scope: str, timeout: float = 1200) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator.cli.app", *args], capture_output=True, text=True,
        env={**os.environ, "EPG_SCOPE": scope}, cwd=REPO, timeout=timeout,
    )


def assert_reacher_feedback(document: dict, indices: list[int]) -> None:
    """One row per Episode, each run to the horizon, with a summary whose distances and trace agree."""
    assert [(e["index"], e["status"], e["failure"]) for e in document["episodes"]] == [(i, "completed", None) for i in indices]
    values = document["values"]
    assert values["policy_failures"] == 0 and [row["index"] for row in values["episodes"]] == indices
    assert set(values["ends"]) == END_CAUSES and values["ends"]["time_limit"] == len(indices)
    assert "episodes.csv" in document["artifacts"] and values["mean_steps"] == HORIZON
    for row in values["episodes"]:
        summary = row["summary"]
        assert (summary["end"], summary["steps"], row["steps"]) == ("time_limit", HORIZON, HORIZON)
        assert 0 <= summary["min_fingertip_target_distance_m"] <= summary["final_fingertip_target_distance_m"] < 0.5
        assert summary["control_cost"] >= 0
        assert isinstance(summary["trace"], str) and 0 < len(summary["trace"]) <= TRACE_LIMIT_CHARS
        assert summary["trace"].startswith("t5 d") and summary["trace"].split("; ")[-1].startswith("t50 d")


def test_scripted_run_on_reacher_submits_the_baseline_and_the_random_program(tmp_path, scope):
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({
        "benchmark": "reacher",  # the package's alias of Reacher-v5
        "seed": 0,
        "budget": {"episodes": 8, "max_submissions": 2, "pool_size": 8},
        "validation": {"episodes": 4, "max_candidates": 2},
        "assessment": {"episodes": 4},
        "agent": {"kind": "scripted", "steps": [{"program": str(BASELINE), "episodes": "0:4"}, {"program": str(RANDOM), "episodes": "0:4"}],
                  "finish": "all"},
    }))
    run_dir = tmp_path / "run"
    result = run_cli(["run", str(spec), "-o", str(run_dir), "--json"], scope)
    assert result.returncode == 0, result.stderr[-4000:]
    manifest = json.loads((run_dir / "run.json").read_text())
    printed = json.loads(result.stdout)
    assert {key: printed[key] for key in manifest} == manifest
    assert manifest["terminal_reason"] == "finished" and manifest["phase"] == "done"
    assert manifest["validation"]["candidates"] == ["s0001", "s0002"]

    digests = {"s0001": capture_program(BASELINE).digest, "s0002": capture_program(RANDOM).digest}
    train = {}
    for submission_id, digest in digests.items():
        record = json.loads((run_dir / "submissions" / submission_id / "record.json").read_text())
        assert (record["program_digest"], record["selector"], record["indices"]) == (digest, "0:4", [0, 1, 2, 3])
        published = json.loads((run_dir / "workspace" / "feedback" / submission_id / "feedback.json").read_text())
        assert published == record["feedback"]
        assert_reacher_feedback(published, [0, 1, 2, 3])
        csv_header = (run_dir / "workspace" / "feedback" / submission_id / "artifacts" / "episodes.csv").read_text().splitlines()[0]
        assert csv_header.endswith("end,final_fingertip_target_distance_m,min_fingertip_target_distance_m,"
                                   "initial_fingertip_target_distance_m,control_cost")
        train[submission_id] = published
    # Both Submissions replayed the same four pool Episodes: the same initial distances, whatever the Program did.
    initial = {sid: [r["summary"]["initial_fingertip_target_distance_m"] for r in doc["values"]["episodes"]] for sid, doc in train.items()}
    assert initial["s0001"] == initial["s0002"] and len(set(initial["s0001"])) == 4
    # The Jacobian-transpose baseline beats uniform random torques on those Episodes.
    assert train["s0001"]["score"] > train["s0002"]["score"]

    validation = json.loads((run_dir / "validation.json").read_text())
    scores = {r["submission_id"]: r["score"] for r in validation["results"]}
    assert validation["selected"] == max(scores, key=scores.get) == manifest["final"]["submission_id"] == "s0001"
    assert manifest["final"]["program_digest"] == digests["s0001"] and manifest["final"]["is_initial_program"] is True
    assessment = json.loads((run_dir / "assessment.json").read_text())
    assert len(assessment["episodes"]) == 4 and assessment["program_digest"] == digests["s0001"]
    assert manifest["assessment"]["score"] == assessment["score"] and manifest["assessment"]["policy_failures"] == 0

    pool_payloads = [p["payload"] for p in json.loads((run_dir / "private" / "pool.json").read_text())]
    workspace_text = "".join(p.read_text(errors="replace") for p in (run_dir / "workspace").rglob("*") if p.is_file())
    assert pool_payloads and not any(payload in workspace_text for payload in pool_payloads)
    assert "Reacher-v5" in (run_dir / "workspace" / "TASK.md").read_text()


def without_renderer(tmp_path: Path) -> Path:
    """A copy of the MuJoCo package whose image leaves out the Debian packages (libOSMesa), under another image name."""
    root = tmp_path / "environments"
    copy = root / "mujoco"
    shutil.copytree(MUJOCO, copy, ignore=shutil.ignore_patterns("tests", "__pycache__", "*.egg-info", "build"))
    pyproject = (copy / "pyproject.toml").read_text()
    stripped = re.sub(r"(?m)^debian = .*\n", "", pyproject).replace('image = "env-mujoco"', 'image = "env-mujoco-no-gl"')
    assert stripped != pyproject and "debian" not in stripped.split("[tool.epg]")[1]
    (copy / "pyproject.toml").write_text(stripped)
    return root


@pytest.mark.parametrize("renderer", ["osmesa", "absent"])
def test_a_run_publishes_the_replay_episodes_contact_sheet_or_says_why_not(renderer, tmp_path, scope, engine):
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({
        "benchmark": "Reacher-v5", "seed": 0,
        "budget": {"episodes": 4, "max_submissions": 1, "pool_size": 4},
        "validation": {"episodes": 2, "max_candidates": 1},
        "assessment": {"episodes": 2, "include_initial_program": False},
        "agent": {"kind": "scripted", "steps": [{"program": str(BASELINE), "episodes": "0:2"}], "finish": "all"},
    }))
    extra = ["--environments", str(without_renderer(tmp_path))] if renderer == "absent" else []
    run_dir = tmp_path / "run"
    try:
        result = run_cli(["run", str(spec), "-o", str(run_dir), "--json", *extra], scope)
        assert result.returncode == 0, result.stderr[-4000:]
        manifest = json.loads(result.stdout)
        image = manifest["images"]["environment"]["tag"]
        libraries = engine.client.containers.run(image, ["sh", "-c", "ldconfig -p | grep -c libOSMesa || true"], remove=True,
                                                 network_mode="none", labels={"org.evopolicygym.scope": scope})
    finally:
        if renderer == "absent":
            for tagged in engine.client.images.list(name="epg/env-mujoco-no-gl"):
                engine.client.images.remove(tagged.id, force=True)
    assert manifest["terminal_reason"] == "finished" and manifest["assessment"]["policy_failures"] == 0
    feedback_dir = run_dir / "workspace" / "feedback" / "s0001"
    published = json.loads((feedback_dir / "feedback.json").read_text())
    assert_reacher_feedback(published, [0, 1])
    replay = published["values"]["replay"]
    first = published["values"]["episodes"][0]["summary"]["replay"]
    assert "replay" not in published["values"]["episodes"][1]["summary"]
    if renderer == "osmesa":
        assert image.startswith("epg/env-mujoco:") and int(libraries) >= 1
        assert replay == {"available": True, "episode": 0, "artifact": "replay.png"} and published["artifacts"] == ["episodes.csv", "replay.png"]
        assert first == {"available": True, "artifact": "replay.png", "frame_steps": [0, 7, 14, 21, 28, 35, 42, 49, 50]}
        sheet = Image.open(io.BytesIO((feedback_dir / "artifacts" / "replay.png").read_bytes()))
        assert sheet.format == "PNG" and sheet.size == (480, 480)
        pixels = np.asarray(sheet.convert("RGB"))
        assert len(np.unique(pixels.reshape(-1, 3), axis=0)) > 16  # a rendered scene, not a blank sheet
    else:
        assert image.startswith("epg/env-mujoco-no-gl:") and int(libraries) == 0
        assert replay["available"] is False and replay["episode"] == 0 and replay["reason"].startswith("no offscreen renderer")
        assert first == {"available": False, "reason": replay["reason"]} and published["artifacts"] == ["episodes.csv"]
        assert not (feedback_dir / "artifacts" / "replay.png").exists()
