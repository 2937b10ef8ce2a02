"""Per-Episode artifacts: bounded by the runner, carried to the Host and back to the Benchmark's Feedback, never recorded."""

from __future__ import annotations

import json

from epg.v1 import runner_pb2
from epg_sdk.codes import EpisodeStatus
from epg_sdk.protocol import values
from epg_sdk.runtime.episode_loop import EPISODE_ARTIFACTS_LIMIT_BYTES, _attach_summary, feedback_records
from orchestrator.kernel.outcomes import EpisodeOutcome
from orchestrator.protocol.runner_messages import outcome_to_proto_record


class Finished:
    def __init__(self, artifacts=None, *, summary=None, fails=False):
        self._artifacts = artifacts
        self._summary = {"end": "time_limit"} if summary is None else summary
        self._fails = fails

    def summary(self):
        return self._summary

    def artifacts(self):
        if self._fails:
            raise RuntimeError("no renderer")
        return self._artifacts


def attached(environment) -> runner_pb2.EpisodeRecord:
    record = runner_pb2.EpisodeRecord(episode=runner_pb2.EpisodeSpec(split="train", index=3))
    _attach_summary(environment, record)
    return record


def test_an_episodes_artifacts_reach_the_benchmarks_feedback_records_beside_its_summary():
    record = attached(Finished({"replay.png": b"\x89PNG..", "frames.txt": b"1 2"}))
    assert [(a.name, a.data) for a in record.artifacts] == [("frames.txt", b"1 2"), ("replay.png", b"\x89PNG..")]
    (sdk_record,) = feedback_records([record])
    assert sdk_record.artifacts == {"frames.txt": b"1 2", "replay.png": b"\x89PNG.."}
    assert sdk_record.summary == {"end": "time_limit"}


def test_artifacts_over_the_limit_are_dropped_and_the_summary_says_so():
    record = attached(Finished({"a.bin": b"x" * (EPISODE_ARTIFACTS_LIMIT_BYTES // 2), "b.bin": b"y" * (EPISODE_ARTIFACTS_LIMIT_BYTES // 2 + 1)}))
    summary = values.decode(record.summary)
    assert not record.artifacts and summary["end"] == "time_limit"
    assert summary["artifacts_error"] == f"artifacts of {EPISODE_ARTIFACTS_LIMIT_BYTES + 1} bytes, over {EPISODE_ARTIFACTS_LIMIT_BYTES}, were dropped"


def test_artifact_names_that_are_not_plain_file_names_or_values_that_are_not_bytes_drop_them_all():
    # "a/b" was refused too before artifacts could have relative POSIX path names (the next test keeps them).
    for bad in ({"../escape.png": b"x", "ok.png": b"y"}, {".hidden": b"x"}, {"a/../b": b"x"}, {"/abs.png": b"x"}, {"a\\b": b"x"},
                {"a//b": b"x"}, {"a/": b"x"}, {"a/./b": b"x"}, {"a/\0b": b"x"}, {"a/.hidden": b"x"}, {"text.txt": "not bytes"}, {"": b""}):
        record = attached(Finished(bad))
        assert not record.artifacts, bad
        assert values.decode(record.summary)["artifacts_error"].startswith("artifact names must be plain file names"), bad


def test_artifacts_may_have_relative_posix_path_names_and_keep_them_to_feedback():
    record = attached(Finished({"episode-000/replay.gif": b"GIF89a", "trace.jsonl": b"{}"}))
    assert [a.name for a in record.artifacts] == ["episode-000/replay.gif", "trace.jsonl"]
    (sdk_record,) = feedback_records([record])
    assert sdk_record.artifacts == {"episode-000/replay.gif": b"GIF89a", "trace.jsonl": b"{}"}


def test_a_failing_artifacts_method_keeps_the_summary_and_says_why():
    summary = values.decode(attached(Finished(fails=True)).summary)
    assert summary == {"end": "time_limit", "artifacts_error": "RuntimeError: no renderer"}


def test_an_environment_without_artifacts_or_summary_attaches_nothing():
    class Bare:
        pass

    record = attached(Bare())
    assert not record.HasField("summary") and not record.artifacts
    assert not attached(Finished({}, summary={})).HasField("summary")


def test_the_host_passes_artifacts_back_to_feedback_but_never_records_them():
    outcome = EpisodeOutcome(index=0, split="test", status=EpisodeStatus.COMPLETED, failure=None, reason="", steps=5, reward=1.0,
                             terminated=False, truncated=True, policy_seconds=0.0, environment_seconds=0.0,
                             summary={"end": "time_limit"}, artifacts={"replay.png": b"\x89PNG"})
    assert [(a.name, a.data) for a in outcome_to_proto_record(outcome).artifacts] == [("replay.png", b"\x89PNG")]
    recorded = json.dumps(outcome.to_json())
    assert "artifacts" not in outcome.to_json() and "PNG" not in recorded and "replay" not in repr(outcome)
