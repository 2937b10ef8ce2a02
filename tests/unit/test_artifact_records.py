"""A Feedback's artifacts in a Run's records: relative paths written below the Submission's artifacts/ and never
outside it (whatever names the Benchmark gives, whatever links an attacker planted), their media types and
retention in record.json, and the Run's bulk artifacts evicted oldest first past the bound, permanent ones never."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from epg_sdk.codes import EpisodeStatus
from orchestrator.kernel.outcomes import ArtifactDetails, ArtifactRetention, EpisodeOutcome
from orchestrator.kernel.ports import BenchmarkInfo, EvaluationFeedback, PlannedEpisode
from orchestrator.kernel.session import Budget, SessionState
from orchestrator.records import schema
from orchestrator.records.artifacts import MAX_ARTIFACT_BYTES, MAX_ARTIFACTS, kept_artifacts, write_artifact_files
from orchestrator.records.feedback import write_artifacts
from orchestrator.records.models import SubmissionRecord, parse
from orchestrator.records.run_dir import RunDirectory
from orchestrator.run.host import RunHost

BULK = ArtifactRetention.BULK
BENCHMARK = BenchmarkInfo(
    id="fake/frames-v0", description="A fake Benchmark.", observation_space={}, action_space={}, horizon=5,
    primary_metric="mean_return", direction="maximize", parameters={"size": 3}, failure_return=0.0,
    parameters_digest="sha256:" + "ab" * 32,
)
POLICY = "def make_policy(context):\n    return None\n"


def files_below(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() or p.is_symlink()}


def test_relative_paths_are_written_below_the_artifact_directory(tmp_path):
    problems = write_artifacts(tmp_path / "s0001", {"episode-000/replay.gif": b"GIF89a", "trace.jsonl": b"{}\n"})
    assert problems == []
    assert (tmp_path / "s0001" / "artifacts" / "episode-000" / "replay.gif").read_bytes() == b"GIF89a"
    assert (tmp_path / "s0001" / "artifacts" / "trace.jsonl").read_bytes() == b"{}\n"


def test_names_that_would_leave_the_directory_are_refused_and_nothing_is_written_outside(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    names = ["../outside/escaped", "/tmp/absolute", f"{outside}/absolute", "a/../../outside/x", "./dot", "a//b", "back\\slash",
             "nul\0byte", ""]
    problems = write_artifacts(tmp_path / "run" / "s0001", {name: b"x" for name in names})
    assert len(problems) == len(names)
    assert files_below(outside) == set() and not Path("/tmp/absolute").exists()
    assert files_below(tmp_path / "run") == set()


def test_a_symlink_planted_in_the_artifact_directory_is_never_followed(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "replay.gif").write_bytes(b"theirs")
    artifacts = tmp_path / "s0001" / "artifacts"
    artifacts.mkdir(parents=True)
    (artifacts / "episode-000").symlink_to(outside)  # a directory component
    (artifacts / "trace.jsonl").symlink_to(outside / "replay.gif")  # the file's own name

    problems = write_artifacts(tmp_path / "s0001", {"episode-000/replay.gif": b"ours", "trace.jsonl": b"ours too"})

    assert (outside / "replay.gif").read_bytes() == b"theirs" and files_below(outside) == {"replay.gif"}
    assert [p for p in problems if "episode-000/replay.gif" in p and "symbolic link" in p]
    assert not (artifacts / "trace.jsonl").is_symlink() and (artifacts / "trace.jsonl").read_bytes() == b"ours too"


def test_an_artifact_directory_that_is_itself_a_symlink_is_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "s0001").mkdir()
    (tmp_path / "s0001" / "artifacts").symlink_to(outside)
    problems = write_artifact_files(tmp_path / "s0001", {"replay.gif": b"x"})
    assert problems and "no artifact written" in problems[0] and files_below(outside) == set()


def test_artifacts_over_the_size_or_count_bound_are_not_kept():
    big = {"big.bin": b"x" * (MAX_ARTIFACT_BYTES + 1), "ok.bin": b"x" * MAX_ARTIFACT_BYTES}
    kept = kept_artifacts(big)
    assert kept.names == ["ok.bin"] and "over" in kept.refused[0]
    many = kept_artifacts({f"f{i:04d}.txt": b"" for i in range(MAX_ARTIFACTS + 3)})
    assert len(many.names) == MAX_ARTIFACTS and len(many.refused) == 3


def test_media_types_are_the_runners_or_guessed_from_the_name_and_retention_is_kept():
    kept = kept_artifacts({"episode-000/replay.gif": b"", "trace.jsonl": b"", "data.unknownext": b""},
                          {"trace.jsonl": ArtifactDetails(media_type="application/x-ndjson"), "episode-000/replay.gif":
                           ArtifactDetails(retention=BULK)})
    assert [(r.name, r.media_type, r.retention) for r in kept.records] == [
        ("episode-000/replay.gif", "image/gif", "bulk"), ("trace.jsonl", "application/x-ndjson", "permanent"),
        ("data.unknownext", "application/octet-stream", "permanent")]


class _Sandbox:
    """Each Submission's Feedback has a permanent summary and a bulk replay of `replay_bytes` bytes."""

    def __init__(self, replay_bytes: int) -> None:
        self.replay_bytes = replay_bytes

    def run_episodes(self, jobs, on_episode=None):
        return [EpisodeOutcome(index=job.episode.index, split="train", status=EpisodeStatus.COMPLETED, failure=None, reason="",
                               steps=1, reward=1.0, terminated=True, truncated=False, policy_seconds=0.0, environment_seconds=0.0)
                for job in jobs]

    def feedback(self, outcomes):
        return EvaluationFeedback(score=1.0, values={}, episodes=tuple(outcomes),
                                  artifacts={"summary.txt": b"s" * 100, "episode-000/replay.gif": b"g" * self.replay_bytes},
                                  artifact_details={"episode-000/replay.gif": ArtifactDetails(retention=BULK)})


def _run(tmp_path: Path, bound: int) -> tuple[RunHost, RunDirectory]:
    records = RunDirectory(tmp_path / "run")
    records.create("benchmark: fake/frames-v0\n")
    (records.workspace / "program" / "policy.py").write_text(POLICY)
    budget = Budget(episodes=10, max_submissions=5, pool_size=2, max_episodes_per_submission=None, max_candidates=2)
    pool = [PlannedEpisode(split="train", index=i, payload=b"", policy_seed=i) for i in range(2)]
    host = RunHost(records=records, sandbox=_Sandbox(1000), benchmark=BENCHMARK, state=SessionState(budget), episode_pool=pool,
                   instructions="", bulk_artifacts_bytes=bound)
    return host, records


def _record(records: RunDirectory, submission: str) -> SubmissionRecord:
    path = records.submission(submission) / "record.json"
    return parse(SubmissionRecord, path, schema.read_record(path, schema.SUBMISSION))


def test_the_submission_record_lists_each_artifact_with_media_type_retention_and_the_parameters_digest(tmp_path):
    host, records = _run(tmp_path, bound=1 << 30)
    host.submit("0")
    record = _record(records, "s0001")
    assert record.parameters_digest == BENCHMARK.parameters_digest
    assert [(a.name, a.media_type, a.retention, a.bytes, a.evicted) for a in record.artifacts] == [
        ("summary.txt", "text/plain", "permanent", 100, None), ("episode-000/replay.gif", "image/gif", "bulk", 1000, None)]
    published = records.published_feedback("s0001") / "artifacts" / "episode-000" / "replay.gif"
    assert published.read_bytes() == b"g" * 1000 and os.stat(published).st_mode & 0o777 == 0o644
    assert os.stat(published.parent).st_mode & 0o777 == 0o755  # the agent, another user, reads it
    kept = records.submission("s0001") / "artifacts" / "episode-000"
    assert os.stat(kept).st_mode & 0o777 == 0o700 and os.stat(kept / "replay.gif").st_mode & 0o777 == 0o600  # Host-private
    document = json.loads((records.published_feedback("s0001") / "feedback.json").read_text())
    assert document["artifacts"] == ["episode-000/replay.gif", "summary.txt"]
    assert [(f["name"], f["media_type"], f["retention"], f["sha256"]) for f in document["artifact_files"]] == [
        ("episode-000/replay.gif", "image/gif", "bulk", hashlib.sha256(b"g" * 1000).hexdigest()),
        ("summary.txt", "text/plain", "permanent", hashlib.sha256(b"s" * 100).hexdigest())]


def test_bulk_artifacts_are_evicted_oldest_first_past_the_bound_and_permanent_ones_never(tmp_path):
    host, records = _run(tmp_path, bound=2500)  # room for two replays of 1000 bytes
    for _ in range(4):
        host.submit("0")
    evicted = {s: [a.name for a in _record(records, s).artifacts if a.evicted] for s in ("s0001", "s0002", "s0003", "s0004")}
    assert evicted == {"s0001": ["episode-000/replay.gif"], "s0002": ["episode-000/replay.gif"], "s0003": [], "s0004": []}
    for submission in ("s0001", "s0002", "s0003", "s0004"):
        gone = evicted[submission] != []
        for place in (records.submission(submission), records.published_feedback(submission)):
            assert (place / "artifacts" / "episode-000" / "replay.gif").exists() is not gone
            assert (place / "artifacts" / "summary.txt").read_bytes() == b"s" * 100  # permanent: kept
    kept_bulk = sum(a.bytes for s in evicted for a in _record(records, s).artifacts if a.retention == "bulk" and not a.evicted)
    assert kept_bulk <= 2500


def test_a_bound_of_zero_evicts_every_bulk_artifact_and_no_permanent_one(tmp_path):
    host, records = _run(tmp_path, bound=0)
    host.submit("0")
    record = _record(records, "s0001")
    assert [(a.name, a.evicted) for a in record.artifacts] == [("summary.txt", None), ("episode-000/replay.gif", True)]
    assert (records.submission("s0001") / "artifacts" / "summary.txt").is_file()


def test_the_export_lists_each_submissions_artifacts_evicted_ones_marked_and_validates(tmp_path):
    import jsonschema

    from orchestrator.reports.export import export_records, export_schema

    host, records = _run(tmp_path, bound=1500)
    records.update_manifest(benchmark=BENCHMARK.id, agent="scripted")
    host.submit("0")
    host.submit("1")
    exported = [r for r in export_records(records.root, name="run") if r["kind"] == "submission"]
    validator = jsonschema.Draft202012Validator(export_schema())
    for record in exported:
        validator.validate(record)
    assert [[(a["name"], a.get("evicted")) for a in r["artifacts"]] for r in exported] == [
        [("summary.txt", None), ("episode-000/replay.gif", True)], [("summary.txt", None), ("episode-000/replay.gif", None)]]
    assert exported[0]["artifacts"][1]["media_type"] == "image/gif" and exported[0]["artifacts"][1]["retention"] == "bulk"


def test_a_submission_completed_from_its_record_on_resume_keeps_its_artifacts_and_their_entries(tmp_path):
    import pytest

    from orchestrator.kernel.rejections import RequestRejected
    from orchestrator.kernel.session import SessionEvent

    class _Crashing(RunDirectory):
        def append(self, event):
            if event.type == SessionEvent.SUBMISSION_COMPLETED.value:
                raise OSError(28, "No space left on device")
            return super().append(event)

    records = _Crashing(tmp_path / "run")
    records.create("benchmark: fake/frames-v0\n")
    (records.workspace / "program" / "policy.py").write_text(POLICY)
    budget = Budget(episodes=10, max_submissions=5, pool_size=2, max_episodes_per_submission=None, max_candidates=2)
    pool = [PlannedEpisode(split="train", index=0, payload=b"", policy_seed=0)]
    host = RunHost(records=records, sandbox=_Sandbox(1000), benchmark=BENCHMARK, state=SessionState(budget), episode_pool=pool,
                   instructions="", bulk_artifacts_bytes=0)
    with pytest.raises(RequestRejected):
        host.submit("0")
    before = _record(records, "s0001")
    resumed = RunHost(records=RunDirectory(records.root), sandbox=_Sandbox(1000), benchmark=BENCHMARK,
                      state=SessionState.replay(budget, RunDirectory(records.root).events()), episode_pool=pool, instructions="",
                      bulk_artifacts_bytes=0)
    assert resumed.recover_in_flight() == "s0001 completed from its record"
    after = _record(records, "s0001")
    # The same entries, the bulk one evicted now that the Submission completed (eviction follows completion).
    assert [{**a.to_json(), "evicted": None} for a in after.artifacts] == [{**a.to_json(), "evicted": None} for a in before.artifacts]
    assert [(a.name, a.evicted) for a in before.artifacts] == [("summary.txt", None), ("episode-000/replay.gif", None)]
    assert [(a.name, a.evicted) for a in after.artifacts] == [("summary.txt", None), ("episode-000/replay.gif", True)]
    assert (records.published_feedback("s0001") / "artifacts" / "summary.txt").read_bytes() == b"s" * 100


def test_an_eviction_that_cannot_be_written_never_voids_the_submission(tmp_path, monkeypatch):
    from orchestrator.kernel.session import SubmissionState
    from orchestrator.records import artifacts

    def full_disk(path, value, **kwargs):
        raise OSError(28, "No space left on device")

    host, records = _run(tmp_path, bound=0)
    monkeypatch.setattr(artifacts, "write_json", full_disk)
    receipt = host.submit("0")
    assert receipt.submission_id == "s0001" and host.status().submissions[0].state is SubmissionState.COMPLETED
    assert [a.evicted for a in _record(records, "s0001").artifacts] == [None, None]  # evicted on a later turn
