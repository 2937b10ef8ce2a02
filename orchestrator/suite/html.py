"""The suite report as one self-contained HTML page: tables and matplotlib plots inlined as base64 PNG (no network).

Its Content-Security-Policy (the same as the run page's) allows images from data: URLs and inline style only:
no script, no request, no base URL or form target, whatever text the run directories hold. Text from the records
given to matplotlib has its `$` escaped (never parsed as mathtext).
"""

from __future__ import annotations

import base64
import html
import io

from matplotlib.figure import Figure

from orchestrator.suite.ranking import Standing
from orchestrator.suite.report import SuiteReport

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"

_STYLE = """
body { font-family: sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #bbb; padding: 0.3em 0.6em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
.best { font-weight: bold; background: #e8f4e8; }
.missing { color: #a00; }
img { display: block; margin: 1em 0; }
"""


def render_suite_html(report: SuiteReport) -> str:
    """Return the page: standings, per-family standings, the held-out table, two plots, the Runs. No I/O."""
    title = f"Suite {report.name}"
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><meta http-equiv='Content-Security-Policy' content='{_e(CSP)}'>"
             f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>",
             f"<h1>{_e(title)}</h1>"]
    if not report.complete:
        pending = sum(1 for run in report.runs if run.problems)
        parts.append(f"<p class='missing'>Incomplete: {pending} of {len(report.runs)} Runs have not finished; the ranking is provisional.</p>")
    parts += [f"<p class='missing'>{_e(note)}</p>" for note in report.notes]
    parts.append("<h2>Aggregate rank score</h2>")
    parts.append(_standings_table(report.overall))
    parts.append(_image(_rank_score_plot(report), "plot-rank-scores", "aggregate rank score per agent"))
    parts.append("<h2>Per family</h2>")
    for family, rows in report.families.items():
        parts.append(f"<h3>{_e(family)}</h3>{_standings_table(rows)}")
    parts.append("<h2>Held-out scores</h2>")
    parts.append(_score_table(report))
    parts.append(_image(_placing_plot(report), "plot-placings", "rank score per Benchmark and agent"))
    parts.append("<h2>Runs</h2><table><tr><th>Run</th><th>phase</th><th>terminal reason</th><th>held-out score</th><th>records</th></tr>")
    for run in report.runs:
        state = "complete" if not run.problems else "; ".join(run.problems)
        parts.append(f"<tr><td>{_e(run.name)}</td><td>{_e(run.phase)}</td><td>{_e(run.terminal_reason or '')}</td>"
                     f"<td>{_number(run.score)}</td><td>{_e(state)}</td></tr>")
    parts.append("</table></body></html>")
    return "\n".join(parts)


def _e(text: str) -> str:
    return html.escape(text, quote=True)


def _m(text: str) -> str:
    """Text for matplotlib, shown literally (never as mathtext)."""
    return text.replace("$", r"\$")


def _number(value: float | None) -> str:
    return "<span class='missing'>none</span>" if value is None else f"{value:.4g}"


def _standings_table(rows: tuple[Standing, ...]) -> str:
    lines = ["<table><tr><th>agent</th><th>rank score</th><th>wins</th><th>top-2</th><th>Benchmarks</th></tr>"]
    for position, s in enumerate(rows):
        css = " class='best'" if position == 0 else ""
        lines.append(f"<tr{css}><td>{_e(s.agent)}</td><td>{s.rank_score:.4f}</td><td>{s.wins}</td><td>{s.top2}</td><td>{s.benchmarks}</td></tr>")
    lines.append("</table>")
    return "".join(lines)


def _score_table(report: SuiteReport) -> str:
    header = "".join(f"<th>{_e(agent)}</th>" for agent in report.agents)
    lines = [f"<table><tr><th>Benchmark</th><th>family</th><th>better</th>{header}</tr>"]
    for benchmark in report.benchmarks:
        cells = []
        for agent in report.agents:
            cell = report.cell(benchmark.id, agent)
            spread = f" &plusmn; {cell.stdev:.3g} (n={len(cell.scores)})" if cell.stdev is not None else ""
            css = " class='best'" if cell.rank == 1 and cell.mean is not None else ""
            cells.append(f"<td{css}>{_number(cell.mean)}{spread} <small>#{cell.rank}</small></td>")
        better = "higher" if benchmark.direction == "maximize" else "lower"
        lines.append(f"<tr><td>{_e(benchmark.id)}</td><td>{_e(benchmark.family)}</td><td>{better}</td>{''.join(cells)}</tr>")
    lines.append("</table>")
    return "".join(lines)


def _image(figure: Figure, element_id: str, alt: str) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    encoded = base64.b64encode(buffer.getvalue()).decode("ascii")
    width, height = (int(v) for v in figure.get_size_inches() * 100)
    return f"<img id='{element_id}' alt='{_e(alt)}' width='{width}' height='{height}' src='data:image/png;base64,{encoded}'>"


def _rank_score_plot(report: SuiteReport) -> Figure:
    rows = list(reversed(report.overall))
    figure = Figure(figsize=(7, 0.5 + 0.45 * max(1, len(rows))), layout="constrained")
    axes = figure.add_subplot()
    axes.barh([_m(s.agent) for s in rows], [s.rank_score for s in rows], color="#4a7ab0")
    for y, s in enumerate(rows):
        axes.text(s.rank_score + 0.01, y, f"{s.rank_score:.4f}", va="center", fontsize=9)
    axes.set_xlim(0, 1.12)
    axes.set_xlabel("aggregate rank score (mean over Benchmarks of (N - rank) / (N - 1))")
    return figure


def _placing_plot(report: SuiteReport) -> Figure:
    benchmarks = [b.id for b in report.benchmarks]
    agents = list(report.agents)
    values = [[report.cell(benchmark, agent).rank_score for agent in agents] for benchmark in benchmarks]
    figure = Figure(figsize=(1.5 + 1.1 * len(agents), 1.0 + 0.4 * len(benchmarks)), layout="constrained")
    axes = figure.add_subplot()
    image = axes.imshow(values, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
    axes.set_xticks(range(len(agents)), [_m(a) for a in agents], rotation=30, ha="right")
    axes.set_yticks(range(len(benchmarks)), [_m(b) for b in benchmarks])
    for row, benchmark in enumerate(benchmarks):
        for column, agent in enumerate(agents):
            rank = report.cell(benchmark, agent).rank
            axes.text(column, row, f"#{rank}", ha="center", va="center", color="white" if values[row][column] < 0.6 else "black", fontsize=8)
    figure.colorbar(image, ax=axes, label="rank score")
    return figure
