"""The suite report read from run directories (written here by hand): table, spread of repeats, ranking, completeness, HTML."""

from __future__ import annotations

import base64
import html
import json
import re
import struct
from pathlib import Path

import pytest

from orchestrator.images.catalogue import discover
from orchestrator.suite.directory import SuiteDirectory
from orchestrator.suite.html import render_suite_html
from orchestrator.suite.report import build_report
from orchestrator.suite.spec import SuiteSpec, plan_suite

SUITE = {"name": "mini", "benchmarks": ["cartpole", "MountainCarContinuous-v0"], "repeats": 2,
         "agents": [{"name": "hc", "agent": {"kind": "hill-climb"}}, {"name": "rnd", "agent": {"kind": "random"}}]}


DIGEST = "sha256:" + "ab" * 32


def finished_run(run_dir: Path, score: float | None, direction: str = "maximize") -> None:
    """A run directory as a finished Run leaves it (what the report reads of it)."""
    for name in ("initial_program", f"programs/{DIGEST.removeprefix('sha256:')}", "submissions/s0001"):
        (run_dir / name).mkdir(parents=True, exist_ok=True)
    (run_dir / "spec.yaml").write_text("benchmark: x\n")
    (run_dir / "validation.json").write_text("{}")
    (run_dir / "submissions" / "s0001" / "record.json").write_text("{}")
    events = [{"type": "created"}, {"type": "submission_completed", "id": "s0001"}, {"type": "validation_done"}]
    (run_dir / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    manifest = {"schema": "epg.run/1", "phase": "done", "terminal_reason": "finished", "metric": {"name": "mean_return", "direction": direction},
                "final": {"submission_id": "s0001", "program_digest": DIGEST} if score is not None else None,
                "assessment": {"score": score} if score is not None else None}
    if score is not None:
        (run_dir / "assessment.json").write_text("{}")
    (run_dir / "run.json").write_text(json.dumps(manifest))


@pytest.fixture
def suite_dir(tmp_path: Path) -> Path:
    plan = plan_suite(SuiteSpec.model_validate(SUITE), tmp_path, discover())
    SuiteDirectory(tmp_path / "suite").create("name: mini\n", "mini", tmp_path, plan)
    return tmp_path / "suite"


def fill(suite_dir: Path, scores: dict[str, float | None], direction: str = "maximize") -> None:
    for name, score in scores.items():
        finished_run(suite_dir / "runs" / name, score, direction)


ALL = {"cartpole-v1--hc--r0": 40.0, "cartpole-v1--hc--r1": 44.0, "cartpole-v1--rnd--r0": 20.0, "cartpole-v1--rnd--r1": 22.0,
       "mountaincarcontinuous-v0--hc--r0": 60.0, "mountaincarcontinuous-v0--hc--r1": 80.0,
       "mountaincarcontinuous-v0--rnd--r0": -33.0, "mountaincarcontinuous-v0--rnd--r1": -34.0}


def test_the_report_averages_repeats_shows_their_spread_and_ranks_the_agents(suite_dir):
    fill(suite_dir, ALL)
    report = build_report(suite_dir)
    assert report.complete and report.notes == ()
    cell = report.cell("CartPole-v1", "hc")
    assert (cell.scores, cell.mean, cell.low, cell.high, cell.repeats, cell.rank) == ((40.0, 44.0), 42.0, 40.0, 44.0, 2, 1)
    assert cell.stdev == pytest.approx(2.8284271)
    assert [(s.agent, s.rank_score, s.wins, s.top2) for s in report.overall] == [("hc", 1.0, 2, 2), ("rnd", 0.0, 0, 2)]
    document = report.to_json()
    assert document["schema"] == "epg.suite_report/1" and document["complete"] is True
    assert [b["id"] for b in document["benchmarks"]] == ["CartPole-v1", "MountainCarContinuous-v0"]
    assert document["standings"][0] == {"position": 1, "agent": "hc", "rank_score": 1.0, "wins": 2, "top2": 2, "benchmarks": 2}
    assert list(document["families"]) == ["classic control"]
    json.dumps(document)


def test_a_minimized_metric_ranks_the_lower_score_first(suite_dir):
    fill(suite_dir, ALL, direction="minimize")
    report = build_report(suite_dir)
    assert report.cell("CartPole-v1", "rnd").rank == 1 and report.overall[0].agent == "rnd"


def test_an_unfinished_suite_is_reported_incomplete_and_its_missing_entries_rank_last(suite_dir):
    partial = {name: score for name, score in ALL.items() if not name.startswith("mountaincarcontinuous-v0--hc")}
    fill(suite_dir, partial)
    run_dir = suite_dir / "runs" / "mountaincarcontinuous-v0--hc--r0"
    run_dir.mkdir()
    (run_dir / "events.jsonl").write_text("")
    (run_dir / "run.json").write_text(json.dumps({"schema": "epg.run/1", "phase": "agent"}))
    report = build_report(suite_dir)
    assert not report.complete
    rows = {run.name: run for run in report.runs}
    assert rows["mountaincarcontinuous-v0--hc--r0"].problems == ("not done (phase agent)",)
    assert rows["mountaincarcontinuous-v0--hc--r1"].problems == ("not started",)
    cell = report.cell("MountainCarContinuous-v0", "hc")
    assert (cell.mean, cell.rank, cell.rank_score) == (None, 2, 0.0)
    # CartPole-v1: hc first; MountainCarContinuous-v0: rnd first. Equal aggregates keep the agents' order.
    assert [(s.agent, s.rank_score, s.wins) for s in report.overall] == [("hc", 0.5, 1), ("rnd", 0.5, 1)]


def test_a_finished_run_missing_a_record_is_not_complete(suite_dir):
    fill(suite_dir, ALL)
    (suite_dir / "runs" / "cartpole-v1--rnd--r1" / "assessment.json").unlink()
    report = build_report(suite_dir)
    assert not report.complete
    assert {run.name: run.problems for run in report.runs if run.problems} == {"cartpole-v1--rnd--r1": ("assessment.json is missing",)}


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_the_html_page_inlines_its_plots_and_needs_no_network(suite_dir):
    fill(suite_dir, ALL)
    page = render_suite_html(build_report(suite_dir))
    images = re.findall(r"<img id='plot-[a-z-]+' alt='([^']*)' width='(\d+)' height='(\d+)' src='data:image/png;base64,([A-Za-z0-9+/=]+)'>",
                        page)
    assert [alt for alt, *_ in images] == ["aggregate rank score per agent", "rank score per Benchmark and agent"]
    for _, width, height, encoded in images:
        assert png_size(base64.b64decode(encoded)) == (int(width), int(height))
    assert not re.search(r"(src|href)=['\"]?(https?:|//)", page) and "<script" not in page and "<link" not in page
    assert "CartPole-v1" in page and "42" in page and "&plusmn;" in page


def test_names_are_escaped_in_the_html_page(suite_dir):
    fill(suite_dir, ALL)
    report = build_report(suite_dir)
    hostile = type(report)(**{**{f: getattr(report, f) for f in report.__dataclass_fields__}, "name": "<script>alert(1)</script>"})
    assert "<script>" not in render_suite_html(hostile)


def test_a_held_out_score_that_is_not_finite_ranks_last_with_a_note(suite_dir):
    fill(suite_dir, {**ALL, "cartpole-v1--rnd--r0": float("nan"), "cartpole-v1--rnd--r1": float("nan"),
                     "cartpole-v1--hc--r0": -1.0, "cartpole-v1--hc--r1": -1.0})
    report = build_report(suite_dir)
    assert (report.cell("CartPole-v1", "rnd").rank, report.cell("CartPole-v1", "hc").rank) == (2, 1)
    assert report.cell("CartPole-v1", "rnd").mean is None
    assert "cartpole-v1--rnd--r0: held-out score nan is not a finite number; ranked as no score" in report.notes


def test_the_suite_page_carries_a_content_security_policy(suite_dir):
    fill(suite_dir, ALL)
    page = render_suite_html(build_report(suite_dir))
    (policy,) = re.findall(r"<meta http-equiv='Content-Security-Policy' content='([^']*)'>", page)
    directives = {d.split()[0]: d.split()[1:] for d in html.unescape(policy).split("; ")}
    assert directives == {"default-src": ["'none'"], "img-src": ["data:"], "style-src": ["'unsafe-inline'"], "base-uri": ["'none'"],
                          "form-action": ["'none'"]}


def test_agent_and_benchmark_names_given_to_the_plots_are_not_read_as_mathtext(suite_dir):
    fill(suite_dir, ALL)
    manifest = json.loads((suite_dir / "suite.json").read_text())
    for run in manifest["runs"]:
        run["agent"] = run["agent"].replace("hc", "$\\frac{x$")
    (suite_dir / "suite.json").write_text(json.dumps(manifest))
    assert "$\\frac{x$" in render_suite_html(build_report(suite_dir))
