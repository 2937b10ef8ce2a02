"""`runs report`: a run directory's diagnostics as a JSON document and as the HTML page with its plots.

The plots need matplotlib, the distribution's `reports` extra; without it the page is written without them and
says why (as does the JSON document's `plots_left_out`).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from orchestrator.records import safe_read
from orchestrator.reports.diagnostics import RunDiagnostics, diagnose
from orchestrator.reports.html import FIGURE_PX, Plot, render_html
from orchestrator.reports.run_records import load_run

REPORT_SCHEMA = "epg.run-report/1"
PLOTS_LEFT_OUT = "No plots: they need matplotlib, which is not installed (pip install 'epg-orchestrator[reports]')."


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
    plots, left_out = _plots(diagnostics)
    output.parent.mkdir(parents=True, exist_ok=True)
    page = render_html(run, diagnostics, plots, left_out).encode("utf-8")
    with safe_read.open_for_writing(output.parent, output.name, append=False) as handle:  # never through a link left there
        handle.write(page)
    width, height = FIGURE_PX
    return {"schema": REPORT_SCHEMA, "run_dir": str(run_dir), "problems": list(run.problems), **diagnostics.to_json(),
            "html": str(output), "plots": [{"name": p.name, "title": p.title, "width": width, "height": height} for p in plots],
            "plots_left_out": left_out}


def _plots(diagnostics: RunDiagnostics) -> tuple[list[Plot], str | None]:
    """The plots of the page and None, or no plots and PLOTS_LEFT_OUT when matplotlib cannot be imported."""
    try:
        from orchestrator.reports.plots import run_plots  # matplotlib: imported only when a page is drawn
    except ImportError:
        if _importable("matplotlib"):
            raise  # something else is broken: not the missing extra
        return [], PLOTS_LEFT_OUT
    return run_plots(diagnostics), None


def _importable(module: str) -> bool:
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True
