"""A Run on MuJoCo's Reacher-v5 end to end: the package's Feedback, the Run's records, and no hidden Episode on the agent's side."""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
from PIL import Image
from support.scripted_runs import assert_every_episode_completed, run_baseline_and_random, run_cli

REPO = Path(__file__).resolve().parents[2]
MUJOCO = REPO / "environments" / "mujoco"
BASELINE = MUJOCO / "baseline"
END_CAUSES = {"time_limit", "unhealthy", "policy_failure"}
HORIZON = 50
TRACE_LIMIT_CHARS = 2000


def assert_reacher_feedback(document: dict, indices: list[int]) -> None:
    """One row per Episode, each run to the horizon, with a summary whose distances and trace agree."""
    assert_every_episode_completed(document, indices)
    values = document["values"]
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
    # "reacher" is the package's alias of Reacher-v5.
    run = run_baseline_and_random("reacher", MUJOCO, 4, benchmark_id="Reacher-v5", tmp_path=tmp_path, scope=scope, timeout=1200)
    for submission_id, published in run.feedback.items():
        assert_reacher_feedback(published, [0, 1, 2, 3])
        csv_header = run.artifact_text(submission_id, "episodes.csv").splitlines()[0]
        assert csv_header.endswith("end,final_fingertip_target_distance_m,min_fingertip_target_distance_m,"
                                   "initial_fingertip_target_distance_m,control_cost")
    train = run.feedback  # Submission id -> its published Feedback
    # Both Submissions replayed the same four pool Episodes: the same initial distances, whatever the Program did.
    initial = {sid: [r["summary"]["initial_fingertip_target_distance_m"] for r in doc["values"]["episodes"]] for sid, doc in train.items()}
    assert initial["s0001"] == initial["s0002"] and len(set(initial["s0001"])) == 4
    # The Jacobian-transpose baseline beats uniform random torques on those Episodes.
    assert train["s0001"]["score"] > train["s0002"]["score"]

    # ... and is selected, so the final Program is the initial one, the one assessed.
    assert run.validation["selected"] == run.manifest["final"]["submission_id"] == "s0001"
    assert run.manifest["final"]["program_digest"] == run.digests["s0001"] and run.manifest["final"]["is_initial_program"] is True
    assert run.assessment["program_digest"] == run.digests["s0001"]


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
        result = run_cli(["run", str(spec), "-o", str(run_dir), "--json", *extra], scope, timeout=1200)
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
