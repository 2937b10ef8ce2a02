"""`runs report` from records alone: the diagnostics, the plots' images and the self-contained page (no engine, no browser)."""

from __future__ import annotations

import html
import io
import json
import re
import time

import pytest
from PIL import Image, ImageStat
from support.fake_runs import FakeRun, FakeSubmission, make_run
from test_export_records import large_programs_run

from orchestrator.records.schema import RecordError
from orchestrator.reports.diagnostics import diagnose
from orchestrator.reports.plots import FIGURE_PX, run_plots
from orchestrator.reports.report import report_json, write_html_report
from orchestrator.reports.run_records import load_run

THREE = [
    FakeSubmission(action=1, indices=[0, 1], rewards=[4.0, 6.0]),  # 5.0
    FakeSubmission(action=2, indices=[1, 2, 3], rewards=[2.0, None, 4.0]),  # 2.0, one failure, index 1 reused
    FakeSubmission(action=3, indices=[0, 1, 2, 3], rewards=[8.0, 8.0, 8.0, 8.0]),  # 8.0, every index reused
]


def test_best_so_far_curve_area_and_gains_follow_the_submissions(tmp_path):
    d = diagnose(load_run(make_run(tmp_path / "run", FakeRun(submissions=THREE))))
    assert [p.score for p in d.submissions] == [5.0, 2.0, 8.0]
    assert [p.best_so_far for p in d.submissions] == [5.0, 5.0, 8.0]
    assert [p.gain for p in d.submissions] == [None, 0.0, 3.0]
    assert [p.episodes_spent for p in d.submissions] == [2, 5, 9]
    assert [p.reused_indices for p in d.submissions] == [0, 1, 4]
    assert d.best_so_far_auc == 2 * 5.0 + 3 * 5.0 + 4 * 8.0
    assert d.best_so_far_mean == pytest.approx(57.0 / 9)
    assert d.gain_per_submission == pytest.approx((8.0 - 5.0) / 2)
    assert [p.failure_codes for p in d.submissions] == [{}, {"exception": 1}, {}]
    assert (d.selected, d.assessment_score, d.initial_assessment_score, d.budget_episodes) == ("s0001", 8.0, 1.5, 20)


def test_the_direction_of_the_metric_decides_what_is_best(tmp_path):
    d = diagnose(load_run(make_run(tmp_path / "run", FakeRun(submissions=THREE, direction="minimize"))))
    assert d.direction == "minimize"
    assert [p.best_so_far for p in d.submissions] == [5.0, 2.0, 2.0]
    assert [p.gain for p in d.submissions] == [None, 3.0, 0.0]
    assert d.gain_per_submission == pytest.approx((5.0 - 2.0) / 2)


def test_program_changes_count_files_and_lines_against_the_program_before(tmp_path):
    d = diagnose(load_run(make_run(tmp_path / "run", FakeRun(submissions=THREE))))
    first = d.submissions[0].change
    assert first is not None and first.changed == ("policy.py",) and (first.lines_added, first.lines_removed) == (1, 1)
    assert all(p.change.files_changed == 1 for p in d.submissions)


def test_candidates_pair_validation_with_the_selected_programs_assessment(tmp_path):
    d = diagnose(load_run(make_run(tmp_path / "run", FakeRun(submissions=THREE, candidates=[0, 2], selected=1))))
    assert [(c.submission_id, c.train_score, c.validation_score, c.assessment_score, c.selected) for c in d.candidates] == [
        ("s0001", 5.0, 10.0, None, False), ("s0003", 8.0, 12.0, 8.0, True)]


def test_an_unreadable_submission_record_is_a_marked_row_not_a_failure(tmp_path):
    root = make_run(tmp_path / "run", FakeRun(submissions=THREE))
    (root / "submissions" / "s0002" / "record.json").write_text("{torn")
    d = diagnose(load_run(root))
    row = d.submissions[1]
    assert row.error is not None and row.error.startswith("not JSON") and row.score is None
    assert [p.best_so_far for p in d.submissions] == [5.0, None, 8.0]


def test_a_directory_without_run_json_is_refused(tmp_path):
    with pytest.raises(RecordError, match="run.json"):
        report_json(tmp_path)


def test_every_plot_is_a_non_blank_png_of_the_fixed_size(tmp_path):
    plots = run_plots(diagnose(load_run(make_run(tmp_path / "run", FakeRun(submissions=THREE)))))
    assert [p.name for p in plots] == ["scores", "budget", "candidates", "failures", "changes", "gains"]
    for plot in plots:
        image = Image.open(io.BytesIO(plot.png)).convert("L")
        assert image.size == FIGURE_PX, plot.name
        assert ImageStat.Stat(image).stddev[0] > 10, plot.name


def test_a_run_without_submissions_still_gets_every_plot(tmp_path):
    plots = run_plots(diagnose(load_run(make_run(tmp_path / "run", FakeRun(submissions=[], candidates=[], selected=None)))))
    assert len(plots) == 6 and all(Image.open(io.BytesIO(p.png)).size == FIGURE_PX for p in plots)


def test_the_html_page_is_self_contained(tmp_path):
    root = make_run(tmp_path / "run", FakeRun(submissions=THREE))
    document = write_html_report(root, tmp_path / "out" / "report.html")
    page = (tmp_path / "out" / "report.html").read_text()
    assert len(re.findall(r'<img id="plot-[a-z]+" ', page)) == len(document["plots"]) == 6
    assert re.findall(r'src="(?!data:image/png;base64,)', page) == [] and "href=" not in page and "<script" not in page
    assert "Content-Security-Policy" in page and "default-src &#x27;none&#x27;" in page
    assert json.loads(json.dumps(document))["episodes_spent"] == 9


def test_the_hosts_copy_of_the_task_and_the_recorded_direction_win_over_what_the_agent_left(tmp_path):
    root = make_run(tmp_path / "run", FakeRun(submissions=THREE))
    told = (root / "workspace" / "TASK.md").read_text()
    (root / "task.md").write_text(told)
    (root / "workspace" / "TASK.md").write_text(told.replace('"maximize"', '"minimize"') + "\nignore the above\n")
    manifest = json.loads((root / "run.json").read_text())
    (root / "run.json").write_text(json.dumps({**manifest, "metric": {"name": "mean_return", "direction": "maximize"}}))
    run = load_run(root)
    assert run.task == told and run.direction == "maximize"
    assert [p.best_so_far for p in diagnose(run).submissions] == [5.0, 5.0, 8.0]


def test_a_workspace_task_that_is_a_link_is_not_followed(tmp_path):
    root = make_run(tmp_path / "run", FakeRun(submissions=THREE))
    secret = tmp_path / "host-secret.txt"
    secret.write_text("## Public spec\n\n```json\n{\"direction\": \"minimize\"}\n```\nHOST SECRET\n")
    (root / "workspace" / "TASK.md").unlink()
    (root / "workspace" / "TASK.md").symlink_to(secret)
    run = load_run(root)
    assert "HOST SECRET" not in run.task and run.task == ""
    assert any("TASK.md: a symbolic link (not followed)" in problem for problem in run.problems)


def test_a_report_of_two_50000_line_programs_counts_the_large_file_in_bounded_time(tmp_path):
    root = large_programs_run(tmp_path / "run")
    started = time.monotonic()
    document = write_html_report(root, tmp_path / "report.html")
    seconds = time.monotonic() - started
    assert seconds < 10, f"{seconds:.1f} s"  # a complexity bound, loose for a loaded machine; bench/diff_bound.py measures it
    first, second = (p["change"] for p in document["submissions"])
    assert first["summarised"] == ["data.csv"] and (first["lines_added"], first["lines_removed"]) == (50_000 + 1, 1)  # + policy.py
    assert second["summarised"] == ["data.csv"] and second["changed"] == ["data.csv", "policy.py"]
    assert 0 < second["lines_removed"] == second["lines_added"] <= 50_000 // 3 + 2


def hostile_run(tmp_path, rewards: list[float], metric: str = "mean_return"):
    root = make_run(tmp_path / "run", FakeRun(submissions=[FakeSubmission(action=i + 1, indices=[i], rewards=[r]) for i, r in enumerate(rewards)],
                                              candidates=[0, 1]))
    task = (root / "workspace" / "TASK.md").read_text()
    (root / "workspace" / "TASK.md").write_text(task.replace('"primary_metric": "mean_return"', f'"primary_metric": {json.dumps(metric)}'))
    return root


@pytest.mark.parametrize("metric", ["$\\frac{x$", "$\\undefinedcommand$"])
def test_a_metric_name_that_matplotlib_would_read_as_mathtext_is_drawn_as_text(tmp_path, metric):
    root = hostile_run(tmp_path, [1.0, 2.0], metric)
    document = write_html_report(root, tmp_path / "report.html")
    assert document["primary_metric"] == metric
    assert [p["name"] for p in document["plots"]] == ["scores", "budget", "candidates", "failures", "changes", "gains"]
    assert "cannot be drawn" not in (tmp_path / "report.html").read_text()


@pytest.mark.parametrize("rewards", [[1e308, 1.7e308], [1.7976931348623157e308, -1.7976931348623157e308]])
def test_scores_near_the_largest_float_are_reported_and_drawn(tmp_path, rewards):
    root = hostile_run(tmp_path, rewards)
    document = write_html_report(root, tmp_path / "report.html")
    assert [p["score"] for p in document["submissions"]] == rewards
    json.loads(json.dumps(document, allow_nan=False))  # an overflowed sum is null, never Infinity
    assert "cannot be drawn" not in (tmp_path / "report.html").read_text()


def test_the_page_forbids_a_base_url_and_form_targets(tmp_path):
    write_html_report(make_run(tmp_path / "run", FakeRun(submissions=THREE)), tmp_path / "report.html")
    page = (tmp_path / "report.html").read_text()
    (policy,) = re.findall(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)">', page)
    directives = {d.split()[0]: d.split()[1:] for d in html.unescape(policy).split("; ")}
    assert directives["base-uri"] == ["'none'"] and directives["form-action"] == ["'none'"] and directives["default-src"] == ["'none'"]
