"""Runs through `epg-orchestrate run` for the engine tests: the CLI call, and a scripted Run of an environment package's
baseline and random Programs with the checks of its records that hold whatever the Benchmark."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import yaml

from orchestrator.kernel.program import capture_program
from support import cli

REPO = Path(__file__).resolve().parents[2]
SUBMISSIONS = ("s0001", "s0002")  # the baseline's Submission, then the random Program's
# The sandbox of the Runs whose subject is not the Episode sandbox: forked isolation, whose sandbox costs about 10 ms of
# CPU where a policy container costs about 280 (the engine's start and removal, the runtime's start). Container
# isolation, the default, keeps the Runs of the tutorial, tests/docker/test_runs.py, test_run_prestart.py,
# test_hostile_agents.py, test_view.py and the CI example, and both modes take the hostile-policy suite.
FORKED = {"isolation": "forked"}


def baseline_and_random_spec(benchmark: str, package: Path, episodes: int) -> dict:
    """A Run spec: package/baseline then package/random, each submitted on pool indices 0:episodes, both candidates.

    The budget is exactly those two Submissions; Validation and Assessment each take `episodes` Episodes.
    """
    selector = f"0:{episodes}"
    return {
        "benchmark": benchmark,
        "seed": 0,
        "budget": {"episodes": 2 * episodes, "max_submissions": 2, "pool_size": 2 * episodes},
        "validation": {"episodes": episodes, "max_candidates": 2},
        "assessment": {"episodes": episodes},
        "sandbox": FORKED,
        "agent": {"kind": "scripted", "steps": [{"program": str(package / "baseline"), "episodes": selector},
                                                {"program": str(package / "random"), "episodes": selector}],
                  "finish": "all"},
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class BaselineAndRandomRun:
    """What a finished Run of baseline_and_random_spec recorded, after the checks of run_baseline_and_random."""

    run_dir: Path
    manifest: dict  # run.json
    digests: dict[str, str]  # Submission id -> the digest of its Program
    feedback: dict[str, dict]  # Submission id -> its Feedback as published in the workspace
    validation: dict  # validation.json
    assessment: dict  # assessment.json

    def artifact_text(self, submission_id: str, name: str) -> str:
        """The text of one artifact of a Submission's published Feedback."""
        return (self.run_dir / "workspace" / "feedback" / submission_id / "artifacts" / name).read_text()


def run_baseline_and_random(benchmark: str, package: Path, episodes: int, *, benchmark_id: str, tmp_path: Path, scope: str,
                            timeout: float) -> BaselineAndRandomRun:
    """Run baseline_and_random_spec(benchmark, package, episodes) through the CLI and check what every Benchmark's Run shows.

    Asserts that the CLI exits 0 and prints run.json; the Run finished with both Submissions as candidates; each
    Submission's record names its Program, selector and indices, and its published Feedback is the recorded one; the
    Validation selected the best score, and that Program is the final one (the initial Program when it is the
    baseline's); the Assessment ran the final Program on `episodes` Episodes without a policy failure; no hidden
    Episode reaches the agent's side, and TASK.md names benchmark_id. Returns the records for the Benchmark's own checks.
    """
    spec, run_dir = tmp_path / "spec.yaml", tmp_path / "run"
    spec.write_text(yaml.safe_dump(baseline_and_random_spec(benchmark, package, episodes)))
    result = cli.run_cli("run", str(spec), "-o", str(run_dir), "--json", scope=scope, timeout=timeout)
    assert result.exit_code == 0, result.stderr[-4000:]
    manifest = json.loads((run_dir / "run.json").read_text())
    printed = json.loads(result.stdout)
    assert {key: printed[key] for key in manifest} == manifest  # what the CLI printed is run.json (and maybe more)
    assert manifest["terminal_reason"] == "finish_called" and manifest["phase"] == "done"
    assert manifest["validation"]["candidates"] == list(SUBMISSIONS)

    digests = dict(zip(SUBMISSIONS, (capture_program(package / "baseline").digest, capture_program(package / "random").digest), strict=True))
    feedback = {}
    for submission_id, digest in digests.items():
        record = json.loads((run_dir / "submissions" / submission_id / "record.json").read_text())
        assert (record["program_digest"], record["selector"], record["indices"]) == (digest, f"0:{episodes}", list(range(episodes)))
        published = json.loads((run_dir / "workspace" / "feedback" / submission_id / "feedback.json").read_text())
        assert published == record["feedback"]
        feedback[submission_id] = published

    validation = json.loads((run_dir / "validation.json").read_text())
    scores = {r["submission_id"]: r["score"] for r in validation["results"]}
    assert validation["selected"] == max(scores, key=scores.get) == manifest["final"]["submission_id"]
    assert manifest["final"]["program_digest"] == digests[validation["selected"]]
    # The baseline is the Run's initial Program, assessed beside the selected one on the same held-out Episodes.
    assert manifest["final"]["is_initial_program"] is (validation["selected"] == SUBMISSIONS[0])
    assessment = json.loads((run_dir / "assessment.json").read_text())
    assert len(assessment["episodes"]) == episodes and assessment["program_digest"] == manifest["final"]["program_digest"]
    assert manifest["assessment"]["score"] == assessment["score"] and manifest["assessment"]["policy_failures"] == 0

    assert_no_hidden_episode_on_the_agents_side(run_dir)
    assert benchmark_id in (run_dir / "workspace" / "TASK.md").read_text()
    return BaselineAndRandomRun(run_dir=run_dir, manifest=manifest, digests=digests, feedback=feedback, validation=validation,
                                assessment=assessment)


def assert_no_hidden_episode_on_the_agents_side(run_dir: Path) -> None:
    """No payload of the Run's private Episode pool stands in any file of its workspace (and the pool is not empty)."""
    pool_payloads = [p["payload"] for p in json.loads((run_dir / "private" / "pool.json").read_text())]
    workspace_text = "".join(p.read_text(errors="replace") for p in (run_dir / "workspace").rglob("*") if p.is_file())
    assert pool_payloads and not any(payload in workspace_text for payload in pool_payloads)


def assert_every_episode_completed(document: dict, indices: list[int]) -> None:
    """Feedback in which the Episodes of exactly these indices, in order, completed: no failure, in the runtime's rows
    or in the Benchmark's per-Episode values."""
    assert [(e["index"], e["status"], e["failure"]) for e in document["episodes"]] == [(i, "completed", None) for i in indices]
    values = document["values"]
    assert values["policy_failures"] == 0 and [row["index"] for row in values["episodes"]] == indices
