"""Run directories written by hand, as the Run driver writes them, for tests of what reads them back (no engine)."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.kernel.program import capture_program

POLICY = "def make_policy(context):\n    return Policy()\n\nclass Policy:\n    def act(self, observation):\n        return {action}\n"
PUBLIC_SPEC = {"id": "Fake-v0", "primary_metric": "mean_return", "direction": "maximize", "horizon": 10, "failure_return": 0.0}
POOL_SEEDS = (987654321001, 987654321002, 987654321003, 987654321004)


@dataclass
class FakeSubmission:
    """One Submission to record: its Program's action, indices and per-Episode rewards (None: a policy failure)."""

    action: int
    indices: list[int]
    rewards: list[float | None]
    voided_first: bool = False  # an earlier admission of it was voided and refunded


@dataclass
class FakeRun:
    submissions: list[FakeSubmission]
    direction: str = "maximize"
    selected: int | None = 0  # position of the selected Submission among the candidates
    candidates: list[int] = field(default_factory=lambda: [0, 1])
    relay: list[dict[str, Any]] = field(default_factory=list)


def episode(index: int, reward: float | None, split: str = "train") -> dict[str, Any]:
    failed = reward is None
    return {"index": index, "split": split, "status": "policy_failure" if failed else "completed", "failure": "exception" if failed else None,
            "reason": "boom" if failed else "", "steps": 3, "reward": 0.0 if failed else reward, "terminated": True, "truncated": False,
            "policy_seconds": 0.01, "environment_seconds": 0.02, "loop_seconds": 0.03, "output_tail": "", "traceback": "", "summary": {}}


def feedback(digest: str, episodes: list[dict[str, Any]]) -> dict[str, Any]:
    score = sum(e["reward"] for e in episodes) / len(episodes)
    return {"schema": "epg.feedback/1", "score": score, "program_digest": digest,
            "values": {"mean_return": score, "episodes": [{"index": e["index"], "return": e["reward"]} for e in episodes]},
            "episodes": episodes, "artifacts": ["episodes.csv"]}


def write_program(directory: Path, action: int) -> str:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "policy.py").write_text(POLICY.format(action=action))
    return capture_program(directory).digest


def make_run(root: Path, run: FakeRun) -> Path:
    """Write a finished Run's records below root; return root."""
    spec = {**PUBLIC_SPEC, "direction": run.direction}
    (root / "workspace" / "feedback").mkdir(parents=True)
    (root / "private").mkdir()
    (root / "workspace" / "TASK.md").write_text(f"# Task\n\n## Public spec\n\n```json\n{json.dumps(spec, indent=2)}\n```\n\n## README\n")
    initial = write_program(root / "initial_program", 0)
    write_program(root / "programs" / initial.removeprefix("sha256:"), 0)
    (root / "private" / "pool.json").write_text(json.dumps(
        [{"index": i, "payload": json.dumps({"seed": s}), "policy_seed": s + 7} for i, s in enumerate(POOL_SEEDS)]))
    events: list[dict[str, Any]] = [{"schema": "epg.event/1", "type": "created", "time": 100.0}]
    digests = []
    clock = 100.0
    for number, submission in enumerate(run.submissions, start=1):
        submission_id = f"s{number:04d}"
        digest = write_program(root / "programs" / "staging", submission.action)
        stored = root / "programs" / digest.removeprefix("sha256:")
        if stored.exists():
            shutil.rmtree(root / "programs" / "staging")
        else:
            (root / "programs" / "staging").rename(stored)
        digests.append(digest)
        if submission.voided_first:
            clock += 1
            events.append({"schema": "epg.event/1", "type": "submission_admitted", "id": submission_id, "indices": submission.indices,
                           "time": clock})
            events.append({"schema": "epg.event/1", "type": "submission_voided", "id": submission_id, "time": clock + 0.1})
        clock += 1
        events.append({"schema": "epg.event/1", "type": "submission_admitted", "id": submission_id, "indices": submission.indices,
                       "selector": ",".join(map(str, submission.indices)), "program_digest": digest, "time": clock})
        document = feedback(digest, [episode(i, r) for i, r in zip(submission.indices, submission.rewards, strict=True)])
        record = {"schema": "epg.submission/1", "id": submission_id, "number": number, "selector": ",".join(map(str, submission.indices)),
                  "indices": submission.indices, "program_digest": digest, "feedback": document}
        (root / "submissions" / submission_id).mkdir(parents=True)
        (root / "submissions" / submission_id / "record.json").write_text(json.dumps(record))
        (root / "workspace" / "feedback" / submission_id).mkdir()
        (root / "workspace" / "feedback" / submission_id / "feedback.json").write_text(json.dumps(document))
        events.append({"schema": "epg.event/1", "type": "submission_completed", "id": submission_id, "score": document["score"],
                       "time": clock + 0.5})
    (root / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    ids = [f"s{i + 1:04d}" for i in run.candidates]
    selected = ids[run.selected] if run.selected is not None and ids else None
    results = [{"submission_id": sid, "program_digest": digests[i], "score": 10.0 + i, "policy_failures": 0,
                "feedback": feedback(digests[i], [episode(0, 10.0 + i, "validation")])} for sid, i in zip(ids, run.candidates, strict=True)]
    (root / "validation.json").write_text(json.dumps({"schema": "epg.validation/1", "candidates": ids, "rule": "agent", "episodes": 1,
                                                      "selected": selected, "results": results}))
    manifest: dict[str, Any] = {
        "schema": "epg.run/1", "benchmark": "Fake-v0", "agent": "scripted", "phase": "done", "seed": 0, "terminal_reason": "finished",
        "initial_program_digest": initial, "seed_key_id": "k-0000000000000000", "seed_key_file": "/secret/place/seed.key",
        "spec_dir": "/secret/spec-dir",
        "budget": {"episodes": 20, "max_submissions": 8, "pool_size": len(POOL_SEEDS), "max_episodes_per_submission": None,
                   "finish": "allow_early"},
        "validation": {"candidates": ids, "rule": "agent", "selected": selected, "scores": {r["submission_id"]: r["score"] for r in results}},
    }
    if selected is not None:
        digest = digests[run.candidates[run.selected]]
        assessed = feedback(digest, [episode(0, 7.0, "test"), episode(1, 9.0, "test")])
        initial_feedback = feedback(initial, [episode(0, 1.0, "test"), episode(1, 2.0, "test")])
        (root / "assessment.json").write_text(json.dumps({**assessed, "schema": "epg.assessment/1", "submission_id": selected,
                                                          "initial_program": initial_feedback}))
        manifest["final"] = {"submission_id": selected, "program_digest": digest, "is_initial_program": False}
        manifest["assessment"] = {"score": 8.0, "episodes": 2, "policy_failures": 0, "initial_program_score": 1.5}
    (root / "run.json").write_text(json.dumps(manifest))
    if run.relay:
        (root / "relay").mkdir()
        (root / "relay" / "exchanges.1.jsonl").write_text("".join(json.dumps(e) + "\n" for e in run.relay))
    return root
