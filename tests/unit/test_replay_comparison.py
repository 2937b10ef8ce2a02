"""`runs replay` without an engine: the hidden Episodes planned again under the Run's key, and the Episode-by-Episode comparison."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from support.fake_runs import POOL_SEEDS, FakeRun, FakeSubmission, make_run

from epg_sdk.codes import EpisodeStatus, FailureCode
from orchestrator.kernel.outcomes import EpisodeOutcome
from orchestrator.kernel.ports import BenchmarkInfo, EpisodeJob, EvaluationFeedback, PlannedEpisode
from orchestrator.kernel.seeds import keyed_seed
from orchestrator.reports.replay import ReplayError, compare_feedback, replay
from orchestrator.reports.run_records import load_run

KEY = bytes(range(32))
TWO = [FakeSubmission(action=1, indices=[0, 1], rewards=[4.0, 6.0]), FakeSubmission(action=2, indices=[1, 3], rewards=[2.0, None])]


class RecordedSandbox:
    """An EpisodeSandbox that plays back what a run directory recorded (the engine's determinism), optionally drifting."""

    def __init__(self, root: Path, *, drift: Callable[[dict], dict] = lambda e: e, pool_seeds: Sequence[int] = POOL_SEEDS) -> None:
        self.outcomes: dict[tuple[str, str, int], dict] = {}
        self.planned: list[tuple[str, int, int]] = []
        self._drift, self._pool_seeds = drift, pool_seeds
        documents = [json.loads(p.read_text())["feedback"] for p in root.glob("submissions/*/record.json")]
        documents += [r["feedback"] for r in json.loads((root / "validation.json").read_text())["results"]]
        assessment = json.loads((root / "assessment.json").read_text())
        documents += [assessment, assessment["initial_program"]]
        for document in documents:
            for episode in document["episodes"]:
                self.outcomes[(document["program_digest"], episode["split"], episode["index"])] = episode

    def describe(self) -> BenchmarkInfo:
        raise NotImplementedError

    def plan(self, split: str, seed: int, count: int) -> list[PlannedEpisode]:
        self.planned.append((split, seed, count))
        seeds = self._pool_seeds if split == "train" else range(count)
        return [PlannedEpisode(split=split, index=i, payload=json.dumps({"seed": s}).encode(), policy_seed=s + 7)
                for i, s in enumerate(seeds[:count])]

    def run_episodes(self, jobs: Sequence[EpisodeJob], on_episode=None) -> list[EpisodeOutcome]:
        outcomes = []
        for job in jobs:
            e = self._drift(dict(self.outcomes[(job.program.digest, job.episode.split, job.episode.index)]))
            outcomes.append(EpisodeOutcome(
                index=e["index"], split=e["split"], status=EpisodeStatus(e["status"]), failure=FailureCode(e["failure"]) if e["failure"] else None,
                reason=e["reason"], steps=e["steps"], reward=e["reward"], terminated=e["terminated"], truncated=e["truncated"],
                policy_seconds=0.5, environment_seconds=0.25))  # other times than recorded: never compared
        return outcomes

    def feedback(self, outcomes: list[EpisodeOutcome]) -> EvaluationFeedback:
        score = sum(o.reward for o in outcomes) / len(outcomes)
        return EvaluationFeedback(score=score, values={"mean_return": score, "episodes": [{"index": o.index, "return": o.reward} for o in outcomes]},
                                  artifacts={"episodes.csv": b""}, episodes=tuple(outcomes))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return make_run(tmp_path / "run", FakeRun(submissions=TWO))


def test_a_faithful_replay_of_each_target_is_identical_and_plans_under_the_runs_key(root):
    sandbox = RecordedSandbox(root)
    for target in ("s0001", "s0002", "validation", "assessment"):
        report = replay(load_run(root), target, sandbox, KEY)
        assert report.identical, [d.line() for d in report.differences]
    assert [(split, seed) for split, seed, _ in sandbox.planned] == [
        ("train", keyed_seed(KEY, 0, "train")), ("train", keyed_seed(KEY, 0, "train")),
        ("validation", keyed_seed(KEY, 0, "validation")), ("test", keyed_seed(KEY, 0, "assessment"))]
    report = replay(load_run(root), "s0002", sandbox, KEY)
    assert report.compared == ("submissions/s0002/record.json", "workspace/feedback/s0002/feedback.json") and report.episodes == 2


def test_an_altered_published_feedback_file_is_named_episode_by_episode(root):
    path = root / "workspace" / "feedback" / "s0002" / "feedback.json"
    document = json.loads(path.read_text())
    document["episodes"][1]["steps"] = 99
    path.write_text(json.dumps(document))
    report = replay(load_run(root), "s0002", RecordedSandbox(root), KEY)
    assert [(d.record, d.where, d.recorded, d.replayed) for d in report.differences] == [
        ("workspace/feedback/s0002/feedback.json", "Episode 1 (index 3) steps", 99, 3)]
    assert report.to_json()["identical"] is False


def test_an_evaluation_that_comes_out_otherwise_differs_from_every_record(root):
    drifted = RecordedSandbox(root, drift=lambda e: {**e, "reward": e["reward"] + 1.0} if e["index"] == 0 else e)
    report = replay(load_run(root), "assessment", drifted, KEY)
    wheres = {(d.record, d.where) for d in report.differences}
    assert ("assessment.json", "score") in wheres and ("assessment.json", "Episode 0 (index 0) reward") in wheres
    assert ("assessment.json initial_program", "values.episodes[0].return") in wheres


def test_a_pool_planned_otherwise_than_the_runs_copy_is_reported(root):
    other = RecordedSandbox(root, pool_seeds=[1, 2, 3, 4])
    report = replay(load_run(root), "s0001", other, KEY)
    assert [d.where for d in report.differences if d.record == "private/pool.json"] == ["pool index 0", "pool index 1"]
    assert "1" not in [str(d.recorded) for d in report.differences]  # the hidden values themselves are not printed


def test_unknown_targets_are_refused_before_anything_runs(root):
    sandbox = RecordedSandbox(root)
    with pytest.raises(ReplayError, match="s0009: no such Submission"):
        replay(load_run(root), "s0009", sandbox, KEY)
    (root / "assessment.json").unlink()
    with pytest.raises(ReplayError, match="assessment.json"):
        replay(load_run(root), "assessment", sandbox, KEY)
    assert sandbox.planned == []


def test_timings_reasons_and_output_are_not_compared():
    recorded = {"score": 1.0, "episodes": [{"index": 0, "steps": 3, "reward": 1.0, "policy_seconds": 0.1, "reason": "", "output_tail": "a"}]}
    replayed = {"score": 1.0, "episodes": [{"index": 0, "steps": 3, "reward": 1.0, "policy_seconds": 0.9, "reason": "x", "output_tail": "b"}]}
    assert compare_feedback(recorded, replayed, record="r") == []
    assert [d.where for d in compare_feedback(recorded, {**replayed, "episodes": []}, record="r")] == ["number of Episodes"]
