"""`runs report`: a run directory's diagnostics as a JSON document and as the HTML page with its plots."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.records import safe_read
from orchestrator.reports.diagnostics import diagnose
from orchestrator.reports.html import render_html
from orchestrator.reports.plots import FIGURE_PX, run_plots
from orchestrator.reports.run_records import load_run

REPORT_SCHEMA = "epg.run-report/1"


def report_json(run_dir: Path) -> dict[str, Any]:
    """The diagnostics of the Run in run_dir as one JSON object. Raises records.schema.RecordError (no readable run.json)."""
    run = load_run(run_dir)
    return {"schema": REPORT_SCHEMA, "run_dir": str(run_dir), "problems": list(run.problems), **diagnose(run).to_json()}


def write_html_report(run_dir: Path, output: Path) -> dict[str, Any]:
    """Write the HTML report of the Run in run_dir to output; return its JSON document with the plots listed.

    Raises records.schema.RecordError (no readable run.json; output is a link, not a regular file or a hard link) and
    OSError (output not writable).
    """
    run = load_run(run_dir)
    diagnostics = diagnose(run)
    plots = run_plots(diagnostics)
    output.parent.mkdir(parents=True, exist_ok=True)
    page = render_html(run, diagnostics, plots).encode("utf-8")
    with safe_read.open_for_writing(output.parent, output.name, append=False) as handle:  # never through a link left there
        handle.write(page)
    width, height = FIGURE_PX
    return {"schema": REPORT_SCHEMA, "run_dir": str(run_dir), "problems": list(run.problems), **diagnostics.to_json(),
            "html": str(output), "plots": [{"name": p.name, "title": p.title, "width": width, "height": height} for p in plots]}
