"""The Run report as one self-contained HTML page: the plots inline as base64 PNG, no script, nothing fetched.

The page's Content-Security-Policy allows images from data: URLs and inline style only, so a browser
opening it requests nothing from any network; `base-uri` and `form-action` are 'none' too (they do not
fall back to default-src), so no text from the records can redirect a relative URL or a form.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from html import escape
from typing import Any

from orchestrator.reports.diagnostics import RunDiagnostics, SubmissionPoint
from orchestrator.reports.run_records import RunRecords

FIGURE_PX = (800, 340)  # (width, height) of every plot, whatever its data, so the page lays them out with fixed sizes


@dataclass(frozen=True, slots=True, kw_only=True)
class Plot:
    """One plot of the page (`reports.plots` draws them): a stable name (the HTML element's id), a title, a caption and its PNG."""

    name: str
    title: str
    caption: str
    png: bytes


CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
_STYLE = """
body { font-family: sans-serif; margin: 24px; color: #222; max-width: 1000px; }
table { border-collapse: collapse; margin: 8px 0 24px; }
td, th { border: 1px solid #ccc; padding: 3px 8px; text-align: left; font-size: 13px; }
figure { margin: 0 0 28px; }
figure img { display: block; }  /* no border: an image is drawn at exactly its PNG's size */
figcaption { font-size: 13px; color: #444; margin-top: 4px; }
.problem { color: #a00; }
"""


def render_html(run: RunRecords, diagnostics: RunDiagnostics, plots: list[Plot], plots_left_out: str | None = None) -> str:
    """Return the report page of run; plots_left_out, when given, is said in place of the plots (why there are none)."""
    width, height = FIGURE_PX
    title = f"Run report: {run.root.name} ({diagnostics.benchmark})"
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{escape(CSP)}">',
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{escape(title)}</h1>", _summary_table(run, diagnostics),
    ]
    if run.problems:
        parts.append("<h2>Unreadable records</h2><ul>" + "".join(f'<li class="problem">{escape(p)}</li>' for p in run.problems) + "</ul>")
    parts.append("<h2>Plots</h2>")
    if plots_left_out:
        parts.append(f'<p class="problem" id="plots-left-out">{escape(plots_left_out)}</p>')
    for plot in plots:
        data = base64.b64encode(plot.png).decode("ascii")
        parts.append(
            f'<figure id="figure-{plot.name}"><h3>{escape(plot.title)}</h3>'
            f'<img id="plot-{plot.name}" class="plot" alt="{escape(plot.title)}" width="{width}" height="{height}" '
            f'src="data:image/png;base64,{data}"><figcaption>{escape(plot.caption)}</figcaption></figure>'
        )
    parts.append("<h2>Submissions</h2>" + _submissions_table(diagnostics.submissions))
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _summary_table(run: RunRecords, d: RunDiagnostics) -> str:
    rows: list[tuple[str, Any]] = [
        ("Benchmark", d.benchmark), ("agent", run.manifest.agent), ("terminal reason", d.terminal_reason),
        ("primary metric", f"{d.primary_metric} ({d.direction})"),
        ("Episodes spent", f"{d.episodes_spent}" + (f" of {d.budget_episodes}" if d.budget_episodes else "")),
        ("Submissions", len(d.submissions)), ("selected", d.selected),
        ("Assessment score", _fmt(d.assessment_score)), ("starting Program on the same Episodes", _fmt(d.initial_assessment_score)),
        ("area under the best-so-far curve", _fmt(d.best_so_far_auc)), ("its mean height", _fmt(d.best_so_far_mean)),
        ("score gain per Submission", _fmt(d.gain_per_submission)),
    ]
    return "<table>" + "".join(f"<tr><th>{escape(k)}</th><td>{escape(str('-' if v is None else v))}</td></tr>" for k, v in rows) + "</table>"


def _submissions_table(points: tuple[SubmissionPoint, ...]) -> str:
    head = ("id", "Episodes", "reused", "spent", "score", "best so far", "gain", "failures", "files changed", "lines +/-", "Program")
    rows = []
    for p in points:
        if p.error:
            rows.append(f'<tr><td>{escape(p.id)}</td><td colspan="{len(head) - 1}" class="problem">unreadable: {escape(p.error)}</td></tr>')
            continue
        failures = ", ".join(f"{code} {count}" for code, count in sorted(p.failure_codes.items())) or "0"
        change = p.change
        cells = (p.id, p.episodes, p.reused_indices, p.episodes_spent, _fmt(p.score), _fmt(p.best_so_far), _fmt(p.gain), failures,
                 "-" if change is None else change.files_changed,
                 "-" if change is None else f"+{change.lines_added}/-{change.lines_removed}", p.program_digest[:19])
        rows.append("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in cells) + "</tr>")
    return "<table><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>" + "".join(rows) + "</table>"


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"
