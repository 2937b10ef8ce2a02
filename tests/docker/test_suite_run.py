"""A two-Benchmark, two-agent suite against the real engine: killed while a Run is going, resumed, and ranked."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

import pytest
import yaml
from PIL import Image, ImageStat
from support.browser import capture_page
from support.cli import run_cli

from orchestrator.backends.labels import selector

REPO = Path(__file__).resolve().parents[2]
# A fixed key: the hidden Episodes, and so the scores, are the same on every test run.
SEED_KEY = "5e" * 32

SUITE = {
    "name": "pair",
    "benchmarks": ["cartpole", "MountainCarContinuous-v0"],
    "agents": [
        {"name": "climber", "agent": {"kind": "hill-climb", "episodes_per_submission": 2, "candidates": 2}},
        {"name": "uniform", "agent": {"kind": "random"}},
    ],
    "seed_key_file": "seed.key",
    "runs_at_once": 2,
    "protocol": {
        "budget": {"episodes": 4, "max_submissions": 2, "pool_size": 4},
        "validation": {"episodes": 2, "max_candidates": 2},
        "assessment": {"episodes": 4, "include_initial_program": False},
        "limits": {"agent_wall_clock_s": 120},
        "sandbox": {"concurrency": 1, "pool_size": 2, "prestart_memory_mib": 0},
    },
}
# The suite that ranks its agents runs its Episodes in forked sandboxes; the one stopped by SIGTERM, in containers.
FORKED = {**SUITE["protocol"]["sandbox"], "isolation": "forked"}


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def phase(run_dir: Path) -> str | None:
    try:
        return json.loads((run_dir / "run.json").read_text()).get("phase")
    except (OSError, json.JSONDecodeError):
        return None


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A directory with a short path: each Run's Host API socket lies below it, and a socket's path holds 107 bytes."""
    path = Path(tempfile.mkdtemp(prefix="suite-", dir="/tmp"))
    yield path
    shutil.rmtree(path)


def test_a_killed_suite_resumes_and_its_report_ranks_the_agents(tmp_path, short_dir, engine, scope):
    (tmp_path / "seed.key").write_text(SEED_KEY + "\n")
    suite_file = tmp_path / "suite.yaml"
    suite_file.write_text(yaml.safe_dump({**SUITE, "protocol": {**SUITE["protocol"], "sandbox": FORKED}}))
    suite_dir = short_dir / "out"
    progress = tmp_path / "progress.txt"
    process = subprocess.Popen(
        [sys.executable, "-m", "orchestrator.cli.app", "suite", "run", str(suite_file), "-o", str(suite_dir), "--json"],
        env={**os.environ, "EPG_SCOPE": scope}, cwd=REPO, stdout=subprocess.DEVNULL, stderr=progress.open("w"),
    )
    # Kill the suite once one Run is done and another is in its agent phase.
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        runs = sorted((suite_dir / "runs").glob("*")) if (suite_dir / "runs").is_dir() else []
        going = [r for r in runs if phase(r) == "agent" and any(e["type"] == "agent_started" for e in lines(r / "events.jsonl"))]
        if going and any(phase(r) == "done" for r in runs):
            break
        assert process.poll() is None, f"the suite ended before it could be killed: {progress.read_text()}"
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    done_before = {r.name for r in (suite_dir / "runs").glob("*") if phase(r) == "done"}
    interrupted = {r.name for r in (suite_dir / "runs").glob("*") if phase(r) not in (None, "done")}
    # A Run killed between writing run.json and logging its first `started` event has only the resume's to show.
    logged_start = {name for name in interrupted
                    if any(e["type"] == "started" for e in lines(suite_dir / "runs" / name / "events.jsonl"))}
    assert done_before and interrupted
    started = [e for e in lines(suite_dir / "suite-events.jsonl") if e["type"] == "run_started"]
    # The Runs die with their suite: nothing goes on beside the resumed one.
    for event in started:
        for _ in range(100):
            if not Path(f"/proc/{event['pid']}").exists():
                break
            time.sleep(0.05)
        assert not Path(f"/proc/{event['pid']}").exists(), f"{event['run']} outlived its suite"
    events_of_done = {name: (suite_dir / "runs" / name / "events.jsonl").read_bytes() for name in done_before}

    result = run_cli("suite", "run", "--resume", str(suite_dir), "--json", scope=scope)
    assert result.exit_code == 0, result.stderr
    resumed = json.loads(result.stdout)
    assert {i["run"] for i in resumed["invocations"]} == {r["name"] for r in resumed["report"]["runs"]} - done_before
    suite_events = lines(suite_dir / "suite-events.jsonl")
    starts = [e for e in suite_events if e["type"] == "run_started"]
    # Finished Runs stay finished; the interrupted ones resumed their own run directory.
    for name in done_before:
        assert sum(e["run"] == name for e in starts) == 1
        assert (suite_dir / "runs" / name / "events.jsonl").read_bytes() == events_of_done[name]
    for name in interrupted:
        assert [e["resume"] for e in starts if e["run"] == name] == [False, True]
        expected = [False, True] if name in logged_start else [True]
        assert [e["resume"] for e in lines(suite_dir / "runs" / name / "events.jsonl") if e["type"] == "started"] == expected
    # Every Run of the suite ran its Episodes in forked sandboxes, as the protocol chose.
    for run_dir in (suite_dir / "runs").glob("*"):
        assert yaml.safe_load((run_dir / "spec.yaml").read_text())["sandbox"]["isolation"] == "forked", run_dir.name
    # Never more than runs_at_once Runs at a time.
    going, most = set(), 0
    for event in suite_events:
        if event["type"] == "run_started":
            going.add(event["run"])
        elif event["type"] in ("run_ended", "suite_started"):
            going = going - {event.get("run")} if event["type"] == "run_ended" else set()
        most = max(most, len(going))
    assert most == 2

    shown = run_cli("suite", "report", str(suite_dir), "--json", "--html", str(tmp_path / "report.html"), scope=scope)
    assert shown.exit_code == 0, shown.stderr
    report = json.loads(shown.stdout)
    assert report["complete"] is True
    assert [b["id"] for b in report["benchmarks"]] == ["CartPole-v1", "MountainCarContinuous-v0"]
    assert all(b["direction"] == "maximize" for b in report["benchmarks"])
    ranks = {(c["benchmark"], c["agent"]): c["rank"] for c in report["table"]}
    assert ranks == {("CartPole-v1", "climber"): 1, ("CartPole-v1", "uniform"): 2,
                     ("MountainCarContinuous-v0", "climber"): 1, ("MountainCarContinuous-v0", "uniform"): 2}
    assert [(s["agent"], s["rank_score"], s["wins"], s["top2"]) for s in report["standings"]] == [("climber", 1.0, 2, 2), ("uniform", 0.0, 0, 2)]
    assert set(report["families"]) == {"classic control"}
    for run in report["runs"]:
        assert run["complete"] and run["phase"] == "done" and run["problems"] == [], run
        manifest = json.loads((suite_dir / run["run_dir"] / "run.json").read_text())
        assert manifest["assessment"]["score"] == run["score"] and manifest["assessment"]["episodes"] == 4
    # The random agent submitted its Benchmark's uniform-random Program, and that is what was assessed.
    uniform = json.loads((suite_dir / "runs" / "cartpole-v1--uniform--r0" / "run.json").read_text())
    random_dir = REPO / "environments" / "cartpole" / "random"
    plan_copy = suite_dir / "runs" / "cartpole-v1--uniform--r0" / "agent" / "plan" / "random" / "policy.py"
    assert plan_copy.read_bytes() == (random_dir / "policy.py").read_bytes()
    stored = suite_dir / "runs" / "cartpole-v1--uniform--r0" / "programs" / uniform["final"]["program_digest"].removeprefix("sha256:")
    assert (stored / "policy.py").read_bytes() == (random_dir / "policy.py").read_bytes()
    page = (tmp_path / "report.html").read_text()
    assert page.count("src='data:image/png;base64,") == 2
    assert not re.search(r"(src|href)=['\"]?(https?:|//)", page), "the page asks the network for something"
    # In a real headless Chromium that can reach nothing: both plots load at their size and are drawn.
    capture = capture_page(tmp_path / "report.html", width=1000, height=800)
    assert capture.requests == () and capture.console_errors == ()
    screenshot = Image.open(io.BytesIO(capture.screenshot)).convert("L")
    plots = [box for box in capture.images if box.id.startswith("plot-")]
    assert [box.id for box in plots] == ["plot-rank-scores", "plot-placings"]
    for box in plots:
        assert box.loaded and (box.width, box.height) == (box.natural_width, box.natural_height), box
        shown = screenshot.crop((round(box.x), round(box.y), round(box.x + box.width), round(box.y + box.height)))
        assert ImageStat.Stat(shown).stddev[0] > 10, f"{box.id} is blank on screen"
    assert engine.client.containers.list(all=True, filters={"label": selector(scope=scope)}, sparse=True) == []


def test_sigterm_stops_the_suites_runs_cleanly_and_the_suite_exits_130(tmp_path, short_dir, engine, scope):
    (tmp_path / "seed.key").write_text(SEED_KEY + "\n")
    suite_file = tmp_path / "suite.yaml"
    suite_file.write_text(yaml.safe_dump({**SUITE, "benchmarks": ["cartpole"], "agents": SUITE["agents"][1:]}))
    suite_dir = short_dir / "out"
    run_dir = suite_dir / "runs" / "cartpole-v1--uniform--r0"
    process = subprocess.Popen(
        [sys.executable, "-m", "orchestrator.cli.app", "suite", "run", str(suite_file), "-o", str(suite_dir), "--json"],
        env={**os.environ, "EPG_SCOPE": scope}, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 300
    while not any(e["type"] == "agent_started" for e in lines(run_dir / "events.jsonl")):
        assert process.poll() is None and time.monotonic() < deadline, "the Run ended before it could be stopped"
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    assert process.wait(120) == 130
    (ended,) = [e for e in lines(suite_dir / "suite-events.jsonl") if e["type"] == "run_ended"]
    assert ended["exit_code"] == 130 and ended["phase"] == "agent"  # stopped as Ctrl-C stops a Run
    owner = next(e["owner"] for e in lines(run_dir / "events.jsonl") if e["type"] == "started")
    assert engine.client.containers.list(all=True, filters={"label": selector(owner=owner)}, sparse=True) == []
    assert lines(suite_dir / "suite-events.jsonl")[-1]["type"] == "suite_stopped"

    result = run_cli("suite", "run", "--resume", str(suite_dir), "--json", scope=scope)
    assert result.exit_code == 0, result.stderr
    (run,) = json.loads(result.stdout)["report"]["runs"]
    assert run["complete"] and run["score"] is not None
