"""The view's reading layer on run and suite directories written by hand: what it shows, what it refuses (links out of the
directory, FIFOs, files past their bound, images that are not images) and that it bounds and escapes what it shows."""

from __future__ import annotations

import json
import os
import struct
import zlib
from pathlib import Path

import pytest
from support.fake_runs import FakeRun, FakeSubmission, make_run

from orchestrator.view import reading

TWO = FakeRun(submissions=[FakeSubmission(action=1, indices=[0, 1], rewards=[4.0, 6.0]), FakeSubmission(action=0, indices=[2], rewards=[None])])


def png(width: int = 2, height: int = 2) -> bytes:
    """A valid RGB PNG of width x height black pixels."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    rows = b"".join(b"\x00" + b"\x00\x00\x00" * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def with_artifact(run_dir: Path, name: str, data: bytes, submission: str = "s0001") -> None:
    """Keep data as the artifact name of a Submission, listed in its record.json as the Host lists it."""
    target = run_dir / "submissions" / submission / "artifacts" / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    record_path = run_dir / "submissions" / submission / "record.json"
    record = json.loads(record_path.read_text())
    record["artifacts"] = [*record.get("artifacts", []), {"name": name, "media_type": "image/png", "retention": "permanent", "bytes": len(data)}]
    record_path.write_text(json.dumps(record))


def test_index_lists_a_run_with_its_phase_budget_scores_and_status(tmp_path):
    make_run(tmp_path / "alpha", TWO)
    (row,) = reading.index(tmp_path)["rows"]
    assert (row["path"], row["benchmark"], row["agent"], row["phase"], row["status"]) == ("alpha", "Fake-v0", "scripted", "done", "finished")
    assert (row["episodes_spent"], row["episodes_left"], row["submissions"], row["best_score"], row["assessment_score"]) == (3, 17, 2, 5.0, 8.0)


def test_a_run_that_has_not_reached_done_is_running(tmp_path):
    run_dir = make_run(tmp_path / "alpha", TWO)
    manifest = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps({**manifest, "phase": "agent"}))
    events = [line for line in (run_dir / "events.jsonl").read_text().splitlines()]
    (run_dir / "events.jsonl").write_text("\n".join(events) + "\n")
    (row,) = reading.index(tmp_path)["rows"]
    assert (row["phase"], row["status"]) == ("agent", "running")


def test_run_page_shows_submissions_episodes_diff_validation_assessment_and_exchanges(tmp_path):
    relay = [{"seq": 1, "time": 100.0, "method": "POST", "path": "/v1/messages", "status": 200, "seconds": 1.5, "tokens": 42,
              "request": json.dumps({"model": "m", "messages": [{"role": "user", "content": "balance the pole"}]}),
              "response": json.dumps({"content": [{"type": "text", "text": "trying"}, {"type": "tool_use", "name": "bash", "input": {"cmd": "ls"}}]})}]
    make_run(tmp_path / "alpha", FakeRun(submissions=TWO.submissions, relay=relay))
    page = reading.run_page(tmp_path, "alpha")
    first, second = page["submissions"]
    assert (first["id"], first["selector"], first["score"], second["failure_codes"]) == ("s0001", "0,1", 5.0, {"exception": 1})
    assert [e["index"] for e in first["episodes"]] == [0, 1] and second["episodes"][0]["reason"] == "boom"
    (change,) = second["diff"]["files"]
    assert change["path"] == "policy.py" and "-        return 1" in change["lines"] and "+        return 0" in change["lines"]
    assert page["validation"]["selected"] == "s0001" and page["assessment"]["score"] == 7.0 + 1.0
    (exchange,) = page["exchanges"]["items"]
    assert exchange["messages"][-1] == {"role": "user", "text": "balance the pole"}
    assert exchange["reply"] == [{"kind": "text", "name": "", "text": "trying"}, {"kind": "tool_call", "name": "bash", "text": '{"cmd": "ls"}'}]
    assert [p["spent"] for p in page["curve"]] == [2, 3]


def test_text_from_the_records_has_its_control_characters_made_visible_and_is_bounded():
    assert reading.visible("a\x1b[31mred\x07\u202eevil") == "a\\x1b[31mred\\x07\\u202eevil"
    assert reading.visible("line\n\ttab") == "line\n\ttab"
    long = reading.visible("x" * 10_000, 100)
    assert long.startswith("x" * 100) and long.endswith("[9900 more characters]") and len(long) < 200
    assert reading.cleaned({"k\x00": [float("nan"), "\x1b"]}) == {"k\\x00": [None, "\\x1b"]}


def test_a_run_reached_through_a_link_is_refused(tmp_path):
    outside = make_run(tmp_path / "outside", TWO)
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "linked").symlink_to(outside)
    with pytest.raises(reading.NotFound, match="symbolic link"):
        reading.run_page(tmp_path / "runs", "linked")
    assert reading.index(tmp_path / "runs")["rows"] == []
    for bad in ("../outside", "/etc", "a/../../outside"):
        with pytest.raises(reading.NotFound, match="not a plain relative path"):
            reading.run_page(tmp_path / "runs", bad)


def test_a_record_linked_out_of_the_run_directory_is_not_read(tmp_path):
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"schema": "epg.validation/1", "candidates": ["SECRET-CANDIDATE"]}))
    run_dir = make_run(tmp_path / "runs" / "alpha", TWO)
    (run_dir / "validation.json").unlink()
    (run_dir / "validation.json").symlink_to(secret)
    page = reading.run_page(tmp_path / "runs", "alpha")
    assert page["validation"] is None and "SECRET-CANDIDATE" not in json.dumps(page)
    assert any("validation.json: a symbolic link (not followed)" in p for p in page["problems"])


def test_a_fifo_for_an_event_log_is_refused_without_blocking(tmp_path):
    run_dir = make_run(tmp_path / "alpha", TWO)
    (run_dir / "events.jsonl").unlink()
    os.mkfifo(run_dir / "events.jsonl")
    (row,) = reading.index(tmp_path)["rows"]
    assert row["status"] == "unreadable" and "FIFO" in row["problem"]


def test_an_image_artifact_is_served_by_its_own_bytes_and_nothing_else_is(tmp_path):
    run_dir = make_run(tmp_path / "alpha", TWO)
    image = png()
    with_artifact(run_dir, "episode-000/frame.png", image)
    with_artifact(run_dir, "drawing.png", b"<svg xmlns='http://www.w3.org/2000/svg'><script>alert(1)</script></svg>")
    (tmp_path / "outside.png").write_bytes(image)
    (run_dir / "submissions" / "s0001" / "artifacts" / "linked.png").symlink_to(tmp_path / "outside.png")
    assert reading.artifact_image(tmp_path, "alpha", "s0001", "episode-000/frame.png") == (image, "image/png")
    with pytest.raises(reading.NotFound, match="not a PNG"):
        reading.artifact_image(tmp_path, "alpha", "s0001", "drawing.png")
    with pytest.raises(reading.NotFound, match="symbolic link"):
        reading.artifact_image(tmp_path, "alpha", "s0001", "linked.png")
    for submission, name in (("s0001", "../record.json"), ("../alpha", "frame.png"), ("s0001", "episode-000/frame.svg")):
        with pytest.raises(reading.NotFound):
            reading.artifact_image(tmp_path, "alpha", submission, name)
    shown = {a["shown_name"]: a["image"] for a in reading.run_page(tmp_path, "alpha")["submissions"][0]["artifacts"]}
    assert shown == {"episode-000/frame.png": True, "drawing.png": True}  # offered by name; served only by its bytes


def test_an_image_past_the_artifact_bound_is_refused(tmp_path, monkeypatch):
    run_dir = make_run(tmp_path / "alpha", TWO)
    with_artifact(run_dir, "big.png", png(64, 64))
    monkeypatch.setattr(reading, "MAX_ARTIFACT_BYTES", 50)
    with pytest.raises(reading.NotFound, match="larger than 50 bytes"):
        reading.artifact_image(tmp_path, "alpha", "s0001", "big.png")


def test_a_long_diff_and_many_episodes_are_cut_to_their_bounds(tmp_path, monkeypatch):
    monkeypatch.setattr(reading, "MAX_DIFF_LINES", 3)
    monkeypatch.setattr(reading, "MAX_EPISODES", 1)
    make_run(tmp_path / "alpha", TWO)
    first = reading.run_page(tmp_path, "alpha")["submissions"][0]
    (change,) = first["diff"]["files"]
    assert len(change["lines"]) == 3 and change["lines_left_out"] > 0
    assert len(first["episodes"]) == 1 and first["episodes_left_out"] == 1


def test_the_signature_changes_when_a_run_moves_on_and_not_otherwise(tmp_path):
    run_dir = make_run(tmp_path / "alpha", TWO)
    before = reading.signature(tmp_path, "run", "alpha")
    assert before and reading.signature(tmp_path, "run", "alpha") == before
    index_before = reading.signature(tmp_path, "index")
    with open(run_dir / "events.jsonl", "a") as log:
        log.write(json.dumps({"schema": "epg.event/1", "type": "finished", "candidates": ["s0001"], "time": 200.0}) + "\n")
    assert reading.signature(tmp_path, "run", "alpha") != before
    assert reading.signature(tmp_path, "index") != index_before
    assert reading.signature(tmp_path, "run", "missing") == ""


def test_suite_page_ranks_its_agents_and_links_each_cell_to_its_runs(tmp_path):
    suite = tmp_path / "pair"
    planned = []
    for name, agent, score in (("one", "climber", 9.0), ("two", "uniform", 3.0)):
        run_dir = make_run(suite / "runs" / name, TWO)
        manifest = json.loads((run_dir / "run.json").read_text())
        manifest["assessment"]["score"] = score
        manifest["metric"] = {"name": "mean_return", "direction": "maximize"}
        (run_dir / "run.json").write_text(json.dumps(manifest))
        (run_dir / "spec.yaml").write_text("benchmark: Fake-v0\n")
        planned.append({"name": name, "run_dir": f"runs/{name}", "spec": f"specs/{name}.yaml", "benchmark": "Fake-v0", "family": "toy",
                        "agent": agent, "repeat": 0, "seed": 0})
    (suite / "suite.json").write_text(json.dumps({"schema": "epg.suite/1", "name": "pair", "runs": planned}))
    page = reading.suite_page(tmp_path, "pair")
    assert [(s["agent"], s["position"]) for s in page["standings"]] == [("climber", 1), ("uniform", 2)]
    cell = next(c for c in page["table"] if c["agent"] == "climber")
    assert cell["score"] == 9.0 and cell["rank"] == 1 and cell["runs"][0]["path"] == "pair/runs/one"
    rows = reading.index(tmp_path)["rows"]
    assert [(r["kind"], r["path"]) for r in rows] == [("suite", "pair"), ("run", "pair/runs/one"), ("run", "pair/runs/two")]
    assert rows[0]["status"] == "finished" and rows[0]["done"] == 2


def test_an_index_row_is_read_again_only_when_its_run_moved_on(tmp_path, monkeypatch):
    run_dir = make_run(tmp_path / "alpha", TWO)
    reads = []
    real = reading.RunDirectory.events
    monkeypatch.setattr(reading.RunDirectory, "events", lambda self: reads.append(1) or real(self))
    first = reading.index(tmp_path)["rows"][0]
    once = len(reads)
    assert once > 0 and reading.index(tmp_path)["rows"][0] == first and len(reads) == once
    with open(run_dir / "events.jsonl", "a") as log:
        log.write(json.dumps({"schema": "epg.event/1", "type": "finished", "candidates": ["s0001"], "time": 200.0}) + "\n")
    assert reading.index(tmp_path)["rows"][0]["seconds"] is not None and len(reads) > once


def test_a_run_directory_named_as_the_root_is_listed_by_its_own_name(tmp_path):
    run_dir = make_run(tmp_path / "solo-run", TWO)
    (row,) = reading.index(run_dir)["rows"]
    assert (row["path"], row["name"], row["status"]) == (".", "solo-run", "finished")


def test_model_exchanges_of_unexpected_shapes_are_shown_not_fatal(tmp_path):
    nested = "[" * 5000 + "]" * 5000
    shapes = [{"choices": [{"message": {"content": "hi", "tool_calls": 5}}]}, {"content": {"not": "a list"}}, {"choices": "x"},
              {"candidates": [{"content": {"parts": {"text": "x"}}}]}, {"output": [1, "two", {"type": "function_call", "name": 3}]}, 7]
    relay = [{"seq": n, "method": "POST", "path": "/v1/x", "status": 200, "request": nested, "response": json.dumps(shape)}
             for n, shape in enumerate(shapes)]
    relay.append({"seq": 99, "method": "POST", "path": "/v1/x", "status": 200, "request": "{}", "response": "data: " + nested + "\n\n"})
    make_run(tmp_path / "alpha", FakeRun(submissions=TWO.submissions, relay=relay))
    items = reading.run_page(tmp_path, "alpha")["exchanges"]["items"]
    assert [item["seq"] for item in items] == [0, 1, 2, 3, 4, 5, 99]
    assert items[0]["reply"] == [{"kind": "text", "name": "", "text": "hi"}]
    assert items[4]["reply"] == [{"kind": "tool_call", "name": "3", "text": ""}]


def test_the_index_of_a_suite_directory_changes_when_one_of_its_runs_moves_on(tmp_path):
    run_dir = make_run(tmp_path / "runs" / "one", TWO)
    planned = [{"name": "one", "run_dir": "runs/one", "spec": "specs/one.yaml", "benchmark": "Fake-v0", "family": "toy", "agent": "a"}]
    (tmp_path / "suite.json").write_text(json.dumps({"schema": "epg.suite/1", "name": "solo", "runs": planned}))
    before = reading.signature(tmp_path, "index")
    with open(run_dir / "events.jsonl", "a") as log:
        log.write(json.dumps({"schema": "epg.event/1", "type": "finished", "candidates": ["s0001"], "time": 200.0}) + "\n")
    assert reading.signature(tmp_path, "index") != before
    assert [(r["kind"], r["path"]) for r in reading.index(tmp_path)["rows"]] == [("suite", "."), ("run", "runs/one")]
