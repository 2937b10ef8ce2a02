"""Reading records back: one-line errors for missing, corrupt, foreign or partial files; the Run's preflight checks."""

from __future__ import annotations

import json

import pytest

from orchestrator.images.catalogue import discover
from orchestrator.records import schema
from orchestrator.records.run_dir import RunDirectory
from orchestrator.run.preflight import preflight
from orchestrator.run.spec import RunSpec


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (None, "missing"),
        (b'{"a": ', "not JSON (1:7: Expecting value)"),
        (b"\xff\xfe", "not UTF-8 text"),
        (b"[]", "not a JSON object but a list"),
        (b'{"schema": "epg.feedback/1"}', "schema 'epg.feedback/1', expected 'epg.run/1'"),
    ],
)
def test_read_record_refuses_in_one_line(tmp_path, content, reason):
    path = tmp_path / "run.json"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(schema.RecordError) as caught:
        schema.read_record(path, schema.RUN)
    assert caught.value.reason == reason and str(caught.value) == f"{path}: {reason}"


def test_read_record_accepts_its_schema_and_records_without_one(tmp_path):
    path = tmp_path / "record.json"
    path.write_text(json.dumps({"schema": schema.SUBMISSION, "id": "s0001"}))
    assert schema.read_record(path, schema.SUBMISSION)["id"] == "s0001"
    path.write_text(json.dumps({"id": "s0002"}))  # written before records named their schema
    assert schema.read_record(path, schema.SUBMISSION)["id"] == "s0002"


def test_read_record_bounds_what_it_reads(tmp_path):
    path = tmp_path / "big.json"
    path.write_text(json.dumps({"x": "y" * 100}))
    with pytest.raises(schema.RecordError, match="larger than 64 bytes"):
        schema.read_record(path, max_bytes=64)


def test_the_manifest_and_every_event_carry_their_schema(tmp_path):
    records = RunDirectory(tmp_path)
    records.update_manifest(phase="agent")
    records.append_event("created", initial_program_digest="sha256:00")
    assert json.loads(records.manifest_path.read_text()) == {"schema": "epg.run/1", "phase": "agent"}
    (event,) = list(records.events())
    assert (event["schema"], event["type"]) == ("epg.event/1", "created")
    records.manifest_path.write_text("{")
    with pytest.raises(schema.RecordError, match="run.json: not JSON"):
        records.read_manifest()


def spec(**fields) -> RunSpec:
    return RunSpec.model_validate({"benchmark": "CartPole-v1", "agent": {"kind": "hill-climb"}, **fields})


def test_preflight_of_a_sound_spec_finds_nothing(tmp_path):
    assert preflight(spec(), tmp_path, discover(), run_dir=tmp_path / "new", environ={}) == []


def test_preflight_names_every_problem_with_its_field(tmp_path):
    (tmp_path / "not-a-program").mkdir()
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "events.jsonl").write_text("")
    found = preflight(
        spec(benchmark="NoSuch-v0", initial_program="not-a-program", seed_key_file="absent.key",
             agent={"kind": "command", "image": "someone/agent:1", "argv": ["true"]}),
        tmp_path, discover(), run_dir=tmp_path / "run", image_exists=lambda image: False, environ={},
    )
    assert [line.split(":")[0] for line in found] == ["benchmark", "initial_program", "seed_key_file", "agent.image", "output"]
    assert "has no policy.py" in found[1]
    assert found[4].endswith("already holds a Run; use --resume to continue it")


def test_preflight_asks_for_the_credential_of_a_coding_agent(tmp_path):
    codex = spec(agent={"kind": "codex", "model": "m"})
    assert preflight(codex, tmp_path, discover(), environ={}) == [
        "relay.credential_env: the codex agent needs a provider credential: set OPENAI_API_KEY in the Host's environment"]
    assert preflight(codex, tmp_path, discover(), environ={"OPENAI_API_KEY": "k"}) == []
