"""EvoPolicyGym packages written here (tests/data/evopolicygym) run unchanged through the real sandbox, from the CLI.

Their five images (Python 3.13, on the shared py313 layers) are built once for this module. Each behaviour is tested
once, where it is cheapest: `env test` of every package; the pixel grid's path artifacts, their media types and
retention, and the frames its Feedback counted; InvalidAction raised inside their `step`; one image's three profiles,
each its own Benchmark with its own parameters digest and horizon; and a two-agent suite over the counter and one
profile, whose counter Run's records, report and export are read too.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from support.cli import invoke_cli, run_cli

from orchestrator.backends.engine import DockerEngine
from orchestrator.backends.labels import selector
from orchestrator.images.builder import ImageBuilder
from orchestrator.kernel.program import capture_program

REPO = Path(__file__).resolve().parents[2]
PACKAGES = REPO / "tests" / "data" / "evopolicygym"
IMAGES = {
    "stdlib_counter": "env-epg-epg-test-benchmark-stdlib-counter",
    "gym_pendulum": "env-epg-epg-test-benchmark-gym-pendulum",
    "pixels": "env-epg-epg-test-benchmark-pixels",
    "strict_actions": "env-epg-epg-test-benchmark-strict-actions",
    "profiled": "env-epg-epg-test-benchmark-profiled",
}
BENCHMARKS = {
    "stdlib_counter": ["epg-test/stdlib-counter-v1"],
    "gym_pendulum": ["epg-test/gymnasium/Pendulum-v1/short-v1"],
    "pixels": ["epg-test/pixels-grid-v1"],
    "strict_actions": ["epg-test/strict-actions-dial-v1"],
    "profiled": ["epg-test/profiled/calm-v1", "epg-test/profiled/breezy-v1", "epg-test/profiled/stormy-v1"],
}
FRAME_BYTES = 16 * 16 * 3
SEED_KEY = "3c" * 32  # a fixed key: the suite's hidden Episodes are the same on every test run

# One Program for both Benchmarks of the suite: it steps the counter towards its target, and pushes the point back.
BOTH = '''\
from evopolicygym.policy import PolicyContext, PolicyValue


class Both:
    def act(self, observation: PolicyValue) -> PolicyValue:
        assert isinstance(observation, dict)
        if "position" in observation:
            position, target = observation["position"], observation["target"]
            return (target > position) - (target < position)
        return max(-1.0, min(1.0, -observation["x"]))


def make_policy(context: PolicyContext) -> Both:
    del context
    return Both()
'''


@pytest.fixture(scope="module")
def built(engine: DockerEngine) -> dict[str, str]:
    """Build (or find) the five packages' images once: image name -> tag. Prints each image's build time."""
    builder = ImageBuilder(engine.client, environments=[PACKAGES], progress=print)
    started = time.monotonic()
    results = builder.ensure(sorted(IMAGES.values()))
    for result in results:
        print(f"{result.name}: {'built' if result.built else 'up to date'} in {result.seconds:.1f} s")
    print(f"the EvoPolicyGym test packages' images: {time.monotonic() - started:.1f} s")
    return {result.name: result.tag for result in results}


def _evaluate(program: Path, benchmark: str, out: Path, scope: str, *, episodes: int) -> dict:
    result = invoke_cli("evaluate", str(program), "-b", benchmark, "-n", str(episodes), "--environments", str(PACKAGES),
                        "--out", str(out), "--json", scope=scope)
    assert result.exit_code == 0, result.stderr
    evaluation = result.json()
    assert evaluation == json.loads((out / "evaluation.json").read_text())
    return evaluation


@pytest.mark.parametrize("module", list(IMAGES))
def test_env_test_passes_every_check_of_the_package_in_its_image(module, built, engine, scope):
    result = invoke_cli("env", "test", str(PACKAGES / module), "-n", "2", "--json", scope=scope)
    assert result.exit_code == 0, f"{result.stdout[-3000:]} {result.stderr[-3000:]}"
    report = result.json()
    assert report["image"] == built[IMAGES[module]]
    assert (report["ok"], report["finished"], sorted(report["benchmarks"])) == (True, True, sorted(BENCHMARKS[module]))
    assert [check for check in report["checks"] if not (check["ok"] and check["finished"])] == []
    # every Benchmark of the image was checked, its baseline run through the sandbox among the checks
    for benchmark in BENCHMARKS[module]:
        names = [check["name"] for check in report["checks"] if check["benchmark"] == benchmark]
        assert "spec is complete and encodable" in names and any(n.startswith("baseline runs through the sandbox") for n in names), (benchmark, names)
    assert engine.client.containers.list(all=True, filters={"label": selector(scope=scope)}, sparse=True) == []


def test_the_pixel_grids_feedback_keeps_its_path_artifacts_with_their_media_types_retention_and_every_frame(built, tmp_path, scope):
    out = tmp_path / "pixels"
    evaluation = _evaluate(PACKAGES / "pixels" / "src" / "pixels" / "programs" / "baseline", "epg-test/pixels-grid-v1", out, scope,
                           episodes=3)
    feedback = json.loads((out / "feedback.json").read_text())
    assert feedback["schema"] == "epg.feedback/1" and feedback["artifact_files"] == evaluation["artifact_files"]
    episodes = evaluation["episodes"]
    assert [e["status"] for e in episodes] == ["completed"] * 3
    steps = [e["steps"] for e in episodes]
    assert all(s > 0 for s in steps)
    expected = {"summary.json": ("application/json", "permanent")}
    for index in range(3):
        expected[f"episode-{index:03d}/frames.bin"] = ("application/octet-stream", "bulk")
        expected[f"episode-{index:03d}/replay.ppm"] = ("image/x-portable-pixmap", "permanent")
    listed = {a["name"]: (a["media_type"], a["retention"]) for a in feedback["artifact_files"]}
    assert listed == expected
    assert sorted(feedback["artifacts"]) == sorted(expected)
    for artifact in feedback["artifact_files"]:
        path = out / "artifacts" / artifact["name"]
        assert path.is_file(), artifact["name"]
        assert path.stat().st_size == artifact["bytes"], artifact["name"]
    # Every observation frame of every step (the initial one too) and every step's metric frame reached their feedback.
    values = feedback["values"]
    assert values["steps"] == steps and values["episodes"] == 3
    assert values["observation_frames"] == sum(steps) + 3
    assert values["metric_frames"] == sum(steps)
    for index, count in enumerate(steps):
        assert (out / "artifacts" / f"episode-{index:03d}" / "frames.bin").stat().st_size == (count + 1) * FRAME_BYTES
        header = (out / "artifacts" / f"episode-{index:03d}" / "replay.ppm").read_bytes()[:20]
        assert header.startswith(f"P6\n{16 * (count + 1)} 16\n255\n".encode())
    assert json.loads((out / "artifacts" / "summary.json").read_text()) == values


def test_an_action_their_step_refuses_with_invalid_action_fails_every_episode_and_a_valid_one_completes(built, tmp_path, scope):
    programs = PACKAGES / "strict_actions" / "src" / "strict_actions" / "programs"
    invalid = _evaluate(programs / "invalid", "epg-test/strict-actions-dial-v1", tmp_path / "invalid", scope, episodes=3)
    assert [(e["status"], e["failure"]) for e in invalid["episodes"]] == [("policy_failure", "invalid_action")] * 3, invalid["episodes"]
    # refused by their Environment's step on the first action (the policy's 10), not by a check of ours
    assert [(e["steps"], e["reason"]) for e in invalid["episodes"]] == [
        (0, "invalid action at step 0: the Environment refused the action")] * 3
    assert invalid["score"] == -1.0
    baseline = _evaluate(programs / "baseline", "epg-test/strict-actions-dial-v1", tmp_path / "baseline", scope, episodes=3)
    assert [(e["status"], e["failure"], e["steps"]) for e in baseline["episodes"]] == [("completed", None, 20)] * 3
    assert baseline["score"] == 20.0


def test_a_profiled_package_lists_each_profile_as_a_benchmark_with_its_own_parameters_and_horizon(built, tmp_path, scope):
    listed = invoke_cli("benchmarks", "--json", "--environments", str(PACKAGES), scope=scope)
    assert listed.exit_code == 0, listed.stderr
    rows = {row["id"]: row for row in listed.json()["benchmarks"]}
    for benchmark in BENCHMARKS["profiled"]:
        assert (rows[benchmark]["image"], rows[benchmark]["python"]) == (IMAGES["profiled"], "3.13"), rows.get(benchmark)
    assert not [row for row in listed.json()["not_built"] if row["image"] in IMAGES.values()]
    baseline = PACKAGES / "profiled" / "src" / "profiled" / "programs" / "baseline"
    calm = _evaluate(baseline, "epg-test/profiled/calm-v1", tmp_path / "calm", scope, episodes=2)
    stormy = _evaluate(baseline, "epg-test/profiled/stormy-v1", tmp_path / "stormy", scope, episodes=2)
    assert (calm["benchmark"], stormy["benchmark"]) == ("epg-test/profiled/calm-v1", "epg-test/profiled/stormy-v1")
    assert calm["parameters_digest"].startswith("sha256:") and stormy["parameters_digest"].startswith("sha256:")
    assert calm["parameters_digest"] != stormy["parameters_digest"]
    assert [(e["status"], e["steps"]) for e in calm["episodes"]] == [("completed", 10)] * 2
    assert [(e["status"], e["steps"]) for e in stormy["episodes"]] == [("completed", 30)] * 2
    assert (calm["values"]["profile"], stormy["values"]["profile"]) == ("calm", "stormy")
    assert calm["images"]["environment"]["tag"] == stormy["images"]["environment"]["tag"] == built[IMAGES['profiled']]


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A directory with a short path: each Run's Host API socket lies below it, and a socket's path holds 107 bytes."""
    path = Path(tempfile.mkdtemp(prefix="epg-pkgs-", dir="/tmp"))
    yield path
    shutil.rmtree(path)


def test_a_two_agent_suite_on_their_packages_ranks_the_agents_and_keeps_each_runs_records(built, tmp_path, short_dir, engine, scope):
    (tmp_path / "seed.key").write_text(SEED_KEY + "\n")
    both = tmp_path / "both"
    both.mkdir()
    (both / "policy.py").write_text(textwrap.dedent(BOTH))
    suite = {
        "name": "their-packages",
        "benchmarks": ["epg-test/stdlib-counter-v1", "epg-test/profiled/breezy-v1"],
        "agents": [
            {"name": "scripted", "agent": {"kind": "scripted", "steps": [{"program": "both", "episodes": "0:2"}], "finish": "all"}},
            {"name": "uniform", "agent": {"kind": "random"}},
        ],
        "seed_key_file": "seed.key",
        "runs_at_once": 2,
        "protocol": {
            "budget": {"episodes": 4, "max_submissions": 2, "pool_size": 4},
            "validation": {"episodes": 2, "max_candidates": 1},
            "assessment": {"episodes": 4, "include_initial_program": False},
            "limits": {"agent_wall_clock_s": 120},
            "sandbox": {"concurrency": 1, "pool_size": 2, "prestart_memory_mib": 0},
        },
    }
    suite_file = tmp_path / "suite.yaml"
    suite_file.write_text(yaml.safe_dump(suite))
    suite_dir = short_dir / "out"
    result = run_cli("suite", "run", str(suite_file), "-o", str(suite_dir), "--environments", str(PACKAGES), "--json", scope=scope)
    assert result.exit_code == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads(result.stdout)["report"]
    assert report["complete"] is True
    assert [b["id"] for b in report["benchmarks"]] == ["epg-test/stdlib-counter-v1", "epg-test/profiled/breezy-v1"]
    ranks = {(c["benchmark"], c["agent"]): c["rank"] for c in report["table"]}
    # Moving towards the target, or pushing back against the drift, beats moving at random.
    assert ranks == {("epg-test/stdlib-counter-v1", "scripted"): 1, ("epg-test/stdlib-counter-v1", "uniform"): 2,
                     ("epg-test/profiled/breezy-v1", "scripted"): 1, ("epg-test/profiled/breezy-v1", "uniform"): 2}
    assert [(s["agent"], s["wins"]) for s in report["standings"]] == [("scripted", 2), ("uniform", 0)]
    shown = run_cli("suite", "report", str(suite_dir), "--json", scope=scope)
    assert shown.exit_code == 0, shown.stderr
    assert json.loads(shown.stdout)["table"] == report["table"]
    digests = {}
    for run in report["runs"]:
        assert run["complete"] and run["phase"] == "done" and run["problems"] == [], run
        manifest = json.loads((suite_dir / run["run_dir"] / "run.json").read_text())
        assert manifest["assessment"]["score"] == run["score"] and manifest["assessment"]["episodes"] == 4
        assert manifest["final"]["submission_id"] is not None
        digests.setdefault(manifest["benchmark"], set()).add(manifest["parameters_digest"])
        assert manifest["benchmark_package"]["image"] in IMAGES.values()
    # Both agents played the same Benchmark parameters; the two Benchmarks' differ.
    assert all(len(found) == 1 for found in digests.values()) and len(set.union(*digests.values())) == 2, digests
    assert all(next(iter(found)).startswith("sha256:") for found in digests.values())

    # The scripted Run on the counter: its records, report and export.
    run_dir = suite_dir / "runs" / "epg-test-stdlib-counter-v1--scripted--r0"
    manifest = json.loads((run_dir / "run.json").read_text())
    program_digest = capture_program(both).digest
    assert (manifest["terminal_reason"], manifest["phase"]) == ("finish_called", "done")
    assert manifest["final"] == {"submission_id": "s0001", "program_digest": program_digest, "is_initial_program": False}
    assert manifest["benchmark_package"] == {"name": "epg-test-benchmark-stdlib-counter", "version": "0.1.0", "image": IMAGES["stdlib_counter"]}
    assert manifest["images"]["environment"]["tag"] == built[IMAGES['stdlib_counter']]
    record = json.loads((run_dir / "submissions" / "s0001" / "record.json").read_text())
    assert (record["schema"], record["program_digest"], record["selector"], record["indices"]) == ("epg.submission/1", program_digest, "0:2", [0, 1])
    assert [e["status"] for e in record["feedback"]["episodes"]] == ["completed"] * 2
    assert record["feedback"] == json.loads((run_dir / "workspace" / "feedback" / "s0001" / "feedback.json").read_text())
    assert json.loads((run_dir / "validation.json").read_text())["selected"] == "s0001"
    assessment = json.loads((run_dir / "assessment.json").read_text())
    assert len(assessment["episodes"]) == 4 and assessment["program_digest"] == program_digest
    assert all(e["status"] == "completed" for e in assessment["episodes"])
    # The random agent submitted the package's own random Program, found beside its baseline.
    uniform = json.loads((suite_dir / "runs" / "epg-test-stdlib-counter-v1--uniform--r0" / "run.json").read_text())
    random_policy = PACKAGES / "stdlib_counter" / "src" / "stdlib_counter" / "programs" / "random" / "policy.py"
    stored = suite_dir / "runs" / "epg-test-stdlib-counter-v1--uniform--r0" / "programs" / uniform["final"]["program_digest"].removeprefix("sha256:")
    assert (stored / "policy.py").read_bytes() == random_policy.read_bytes()

    checked = invoke_cli("spec", "check", str(run_dir / "spec.yaml"), "--environments", str(PACKAGES), "--json", scope=scope)
    assert (checked.exit_code, checked.json()["valid"], checked.json()["problems"]) == (0, True, []), checked.stdout

    page = tmp_path / "report.html"
    reported = invoke_cli("runs", "report", str(run_dir), "--html", str(page), "--json", scope=scope)
    assert reported.exit_code == 0, reported.stderr
    document = reported.json()
    assert (document["benchmark"], document["selected"], document["assessment_score"]) == (
        "epg-test/stdlib-counter-v1", "s0001", manifest["assessment"]["score"])
    assert [s["id"] for s in document["submissions"]] == ["s0001"] and document["problems"] == []
    assert page.read_text().startswith("<!DOCTYPE html>") or "<html" in page.read_text()[:500]
    exported = tmp_path / "export.jsonl"
    done = invoke_cli("runs", "export", str(run_dir), "--file", str(exported), "--json", scope=scope)
    assert done.exit_code == 0, done.stderr
    assert done.json()["records"] == len(exported.read_text().splitlines()) > 0
    records = [json.loads(line) for line in exported.read_text().splitlines()]
    assert [r["kind"] for r in records] == ["task", "submission", "outcome"]
    task, submission, outcome = records
    assert (task["benchmark"], task["agent"], task["public_spec"]["id"]) == ("epg-test/stdlib-counter-v1", "scripted", "epg-test/stdlib-counter-v1")
    assert (submission["submission_id"], submission["program"]["digest"]) == ("s0001", program_digest)
    assert submission["feedback"] == record["feedback"]
    assert (outcome["phase"], outcome["terminal_reason"]) == ("done", "finish_called")
    assert engine.client.containers.list(all=True, filters={"label": selector(scope=scope)}, sparse=True) == []
