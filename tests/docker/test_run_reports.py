"""Reports, exports and replays of a real Run: the HTML page in headless Chromium, the export against its schema, replays.

One tiny hill-climb Run on CartPole is recorded once for the module (about 15 s); each test reads it or a copy.
"""

from __future__ import annotations

import base64
import io
import json
import re
import shutil
from pathlib import Path

import jsonschema
import pytest
import yaml
from PIL import Image, ImageChops, ImageStat
from support.browser import capture_page
from support.cli import run_cli
from support.scripted_runs import FORKED

from orchestrator.kernel.seeds import keyed_seed
from orchestrator.reports.export import export_schema
from orchestrator.reports.plots import FIGURE_PX
from orchestrator.run.seed_key import read_key

REPO = Path(__file__).resolve().parents[2]
SPEC = {
    "benchmark": "CartPole-v1",
    "agent": {"kind": "hill-climb", "episodes_per_submission": 4},
    "budget": {"episodes": 16, "max_submissions": 4, "pool_size": 8},
    "validation": {"episodes": 4, "max_candidates": 2},
    "assessment": {"episodes": 4},
    "sandbox": {"pool_size": 2, **FORKED},
}


@pytest.fixture(scope="module")
def recorded_run(tmp_path_factory: pytest.TempPathFactory, scope: str) -> Path:
    """A finished Run's directory; tests that alter records work on a copy."""
    root = tmp_path_factory.mktemp("reported")
    (root / "spec.yaml").write_text(yaml.safe_dump(SPEC))
    result = run_cli("run", str(root / "spec.yaml"), "-o", str(root / "runs" / "cartpole"), "--json", scope=scope)
    assert result.exit_code == 0, result.stderr
    manifest = json.loads(result.stdout)
    assert manifest["phase"] == "done" and manifest["submissions_made"] >= 2
    return root / "runs" / "cartpole"


def test_report_page_renders_every_plot_in_headless_chromium_without_network(recorded_run, tmp_path, scope):
    page = tmp_path / "report.html"
    result = run_cli("runs", "report", str(recorded_run), "--html", str(page), "--json", scope=scope)
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    assert [p["name"] for p in document["plots"]] == ["scores", "budget", "candidates", "failures", "changes", "gains"]
    assert document["episodes_spent"] == sum(p["episodes"] for p in document["submissions"]) > 0
    embedded = {m[0]: m[1] for m in re.findall(r'<img id="(plot-[a-z]+)"[^>]*src="data:image/png;base64,([^"]+)"', page.read_text())}

    capture = capture_page(page, width=1000, height=800)

    assert capture.requests == () and capture.console_errors == ()
    screenshot = Image.open(io.BytesIO(capture.screenshot)).convert("RGB")
    plots = [box for box in capture.images if box.id.startswith("plot-")]
    assert [box.id for box in plots] == [f"plot-{p['name']}" for p in document["plots"]]
    for box in plots:
        assert box.loaded and (box.natural_width, box.natural_height) == FIGURE_PX, box
        assert (box.width, box.height) == FIGURE_PX, box
        shown = screenshot.crop((round(box.x), round(box.y), round(box.x) + FIGURE_PX[0], round(box.y) + FIGURE_PX[1]))
        assert ImageStat.Stat(shown.convert("L")).stddev[0] > 10, f"{box.id} is blank on screen"
        drawn = Image.open(io.BytesIO(base64.b64decode(embedded[box.id]))).convert("RGB")
        difference = ImageStat.Stat(ImageChops.difference(shown, drawn).convert("L")).mean[0]
        assert difference < 3, f"{box.id} on screen is not its plot (mean difference {difference:.1f})"


def test_the_browser_check_sees_a_page_that_asks_for_the_network(tmp_path):
    page = tmp_path / "remote.html"
    page.write_text('<!DOCTYPE html><html><body><img id="far" src="http://example.invalid/plot.png" width="40" height="30">'
                    '<link rel="stylesheet" href="https://cdn.example.invalid/site.css"></body></html>')
    capture = capture_page(page, width=400, height=300)
    assert set(capture.requests) == {"http://example.invalid/plot.png", "https://cdn.example.invalid/site.css"}
    (image,) = capture.images
    assert not image.loaded and Image.open(io.BytesIO(capture.screenshot)).size == (400, 300)


def test_export_of_a_recorded_run_validates_against_its_schema_and_holds_no_hidden_data(recorded_run, tmp_path, scope):
    validator = jsonschema.Draft202012Validator(export_schema())
    out = tmp_path / "run.jsonl"
    result = run_cli("runs", "export", str(recorded_run), "--format", "jsonl", "--file", str(out), "--json", scope=scope)
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    for record in records:
        validator.validate(record)
    manifest = json.loads((recorded_run / "run.json").read_text())
    kinds = [r["kind"] for r in records]
    assert kinds == ["task"] + ["submission"] * manifest["submissions_made"] + ["outcome"]
    assert records[-1]["assessment"]["score"] == manifest["assessment"]["score"]
    assert summary == {"file": str(out), "records": len(records), "runs": ["."]} and {r["run"] for r in records} == {"."}
    # A directory of Runs (a suite's) exports each: here the parent of the run directory, in diff form.
    suite = run_cli("runs", "export", str(recorded_run.parent), "--program", "diff", scope=scope)
    assert suite.exit_code == 0, suite.stderr
    suite_records = [json.loads(line) for line in suite.stdout.splitlines()]
    assert {r["run"] for r in suite_records} == {"cartpole"} and len(suite_records) == len(records)
    for record in suite_records:
        validator.validate(record)

    key = read_key(Path(manifest["seed_key_file"]))
    pool = json.loads((recorded_run / "private" / "pool.json").read_text())
    hidden = [key.hex(), manifest["seed_key_file"], str(recorded_run / "private")]
    hidden += [str(keyed_seed(key, manifest["seed"], purpose)) for purpose in ("train", "validation", "assessment")]
    hidden += [e["payload"] for e in pool] + [str(e["policy_seed"]) for e in pool]
    hidden += [str(n) for e in pool for n in json.loads(e["payload"]).values()]
    text = out.read_text() + suite.stdout
    assert [value for value in hidden if value in text] == []


def test_replay_is_identical_on_the_recorded_run_and_names_an_altered_feedback(recorded_run, tmp_path, scope):
    run_dir = tmp_path / "copy"
    shutil.copytree(recorded_run, run_dir)
    same = run_cli("runs", "replay", str(run_dir), "s0002", "assessment", "--json", scope=scope)
    assert same.exit_code == 0, same.stdout + same.stderr
    report = json.loads(same.stdout)
    assert report["identical"] and report["images"]["same_image"]
    submission, assessment = report["replays"]
    assert submission["identical"] and submission["differences"] == [] and submission["episodes"] == 4
    assert submission["compared"] == ["submissions/s0002/record.json", "workspace/feedback/s0002/feedback.json"]
    assert assessment["identical"] and assessment["split"] == "test" and len(assessment["programs"]) == 2

    published = run_dir / "workspace" / "feedback" / "s0002" / "feedback.json"
    document = json.loads(published.read_text())
    document["episodes"][1]["steps"] += 1
    published.write_text(json.dumps(document))
    recorded = json.loads((run_dir / "assessment.json").read_text())
    recorded["episodes"][0]["reward"] += 1.0
    (run_dir / "assessment.json").write_text(json.dumps(recorded))
    altered = run_cli("runs", "replay", str(run_dir), "s0002", "assessment", scope=scope)
    assert altered.exit_code == 1, altered.stdout + altered.stderr
    lines = [line for line in altered.stdout.splitlines() if line.startswith("differs")]
    assert len(lines) == 2, altered.stdout
    assert lines[0].startswith("differs s0002 workspace/feedback/s0002/feedback.json: Episode 1 (index 1) steps: recorded")
    assert lines[1].startswith("differs assessment assessment.json: Episode 0 (index 0) reward: recorded")
    assert "s0002: 4 Episodes of train replayed" in altered.stdout and ": 1 difference\n" in altered.stdout
