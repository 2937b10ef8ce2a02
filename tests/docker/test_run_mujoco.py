"""MuJoCo through the sandbox beyond the image tests: a Run on Reacher-v5 end to end (the package's Feedback, the Run's
records, the replay Episode's contact sheet, no hidden Episode on the agent's side), and an image without a renderer."""

from __future__ import annotations

import io
import re
import shutil
from pathlib import Path

import numpy as np
from PIL import Image
from support.package_sandbox import package_sandbox_factory
from support.scripted_runs import assert_every_episode_completed, run_baseline_and_random

from orchestrator.kernel.evaluation import evaluate_program
from orchestrator.kernel.program import capture_program

REPO = Path(__file__).resolve().parents[2]
MUJOCO = REPO / "environments" / "mujoco"
BASELINE = MUJOCO / "baseline"
END_CAUSES = {"time_limit", "unhealthy", "policy_failure"}
HORIZON = 50
TRACE_LIMIT_CHARS = 2000
NO_RENDERER = "env-mujoco-no-gl"  # the image of the package without its Debian packages


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


def test_scripted_run_on_reacher_submits_the_baseline_and_the_random_program_and_publishes_the_replay_sheet(tmp_path, scope, engine):
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

    # Pool index 0 is the replay Episode: the image (which has libOSMesa) rendered it, and each Submission publishes its sheet.
    image = run.manifest["images"]["environment"]["tag"]
    libraries = engine.client.containers.run(image, ["sh", "-c", "ldconfig -p | grep -c libOSMesa || true"], remove=True,
                                             network_mode="none", labels={"org.evopolicygym.scope": scope})
    assert image.startswith("epg/env-mujoco:") and int(libraries) >= 1
    for submission_id, published in run.feedback.items():
        assert published["values"]["replay"] == {"available": True, "episode": 0, "artifact": "replay.png"}, submission_id
        assert published["artifacts"] == ["episodes.csv", "replay.png"]
        first = published["values"]["episodes"][0]["summary"]["replay"]
        assert first == {"available": True, "artifact": "replay.png", "frame_steps": [0, 7, 14, 21, 28, 35, 42, 49, 50]}
        assert all("replay" not in row["summary"] for row in published["values"]["episodes"][1:])
        sheet_path = run.run_dir / "workspace" / "feedback" / submission_id / "artifacts" / "replay.png"
        sheet = Image.open(io.BytesIO(sheet_path.read_bytes()))
        assert sheet.format == "PNG" and sheet.size == (480, 480)
        pixels = np.asarray(sheet.convert("RGB"))
        assert len(np.unique(pixels.reshape(-1, 3), axis=0)) > 16  # a rendered scene, not a blank sheet


def without_renderer(tmp_path: Path, image: str) -> Path:
    """A copy of the MuJoCo package whose image leaves out the Debian packages (libOSMesa), under the image name given."""
    copy = tmp_path / "environments" / "mujoco"
    shutil.copytree(MUJOCO, copy, ignore=shutil.ignore_patterns("tests", "__pycache__", "*.egg-info", "build"))
    pyproject = (copy / "pyproject.toml").read_text()
    stripped = re.sub(r"(?m)^debian = .*\n", "", pyproject).replace('image = "env-mujoco"', f'image = "{image}"')
    assert stripped != pyproject and "debian" not in stripped.split("[tool.epg]")[1]
    (copy / "pyproject.toml").write_text(stripped)
    return copy


def test_an_image_without_a_renderer_runs_the_replay_episode_and_says_why_it_has_no_sheet(tmp_path, scope, engine):
    # Tagged by content like every image the builder makes, and kept like them: the next run finds it up to date.
    sandbox_on = package_sandbox_factory(engine, without_renderer(tmp_path, NO_RENDERER), NO_RENDERER, scope, pool_size=2)
    with sandbox_on("reacher") as sandbox:
        evaluation = evaluate_program(sandbox, capture_program(BASELINE), split="train", seed=0, episodes=2)
        image = sandbox.images.environment
    libraries = engine.client.containers.run(image, ["sh", "-c", "ldconfig -p | grep -c libOSMesa || true"], remove=True,
                                             network_mode="none", labels={"org.evopolicygym.scope": scope})
    assert image.startswith(f"epg/{NO_RENDERER}:") and int(libraries) == 0
    feedback = evaluation.feedback
    document = {"episodes": [{"index": e.index, "status": e.status.value, "failure": e.failure} for e in feedback.episodes],
                "values": feedback.values, "artifacts": list(feedback.artifacts)}
    assert_reacher_feedback(document, [0, 1])
    replay = feedback.values["replay"]
    assert replay["available"] is False and replay["episode"] == 0 and replay["reason"].startswith("no offscreen renderer")
    assert feedback.values["episodes"][0]["summary"]["replay"] == {"available": False, "reason": replay["reason"]}
    assert "replay" not in feedback.values["episodes"][1]["summary"]
    assert list(feedback.artifacts) == ["episodes.csv"]
