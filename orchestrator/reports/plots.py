"""The plots of a Run report, drawn with matplotlib (Agg, no display) as PNG images of a fixed size.

Every plot is FIGURE_PX pixels (width, height) whatever its data, so a page can lay them out with
fixed sizes; a plot without data says so in its frame. matplotlib's object API is used (Figure,
not pyplot), so no global state or backend is touched.

matplotlib is the `reports` extra of the distribution: the page (`reports.html`, which owns the plots' size and
their `Plot` value) is written without this module when it is not installed.

The records are not trusted to be drawable: every text taken from them (Submission ids, the metric's
name, failure codes) has its `$` escaped, so matplotlib never parses it as mathtext; every number is
drawn within +-PLOTTABLE (a score near 1e308 would overflow matplotlib's scales), and a plot that still
cannot be drawn becomes a frame saying so rather than the end of the report.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from orchestrator.reports.diagnostics import RunDiagnostics
from orchestrator.reports.html import FIGURE_PX, Plot

DPI = 100
_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")


PLOTTABLE = 1e100  # numbers are drawn within +-PLOTTABLE; matplotlib's scales overflow near the largest floats


def run_plots(diagnostics: RunDiagnostics) -> list[Plot]:
    """Every plot of the report, in page order."""
    return [_drawn(make, diagnostics) for make in (_scores, _budget, _candidates, _failures, _changes, _gains)]


def _drawn(make: Callable[[RunDiagnostics], Plot], d: RunDiagnostics) -> Plot:
    """make(d), or, when matplotlib cannot draw what the records hold, a frame that says so under the same name."""
    try:
        return make(d)
    except (ValueError, ArithmeticError, RuntimeError) as exc:  # numpy's LinAlgError is a ValueError
        name = make.__name__.strip("_")
        figure, axes = _figure()
        _empty(axes, _text(f"cannot be drawn from these records ({type(exc).__name__})"))
        return Plot(name=name, title=name, caption=f"the records hold values this plot cannot draw: {exc}"[:300], png=_png(figure))


def _text(value: object) -> str:
    """Text from the records as matplotlib must show it: literally, never as mathtext."""
    return str(value).replace("$", r"\$")


def _v(value: float | None) -> float | None:
    """A number as drawn: None for none or NaN, else within +-PLOTTABLE."""
    if value is None or math.isnan(value):
        return None
    return max(-PLOTTABLE, min(PLOTTABLE, value))


def _gap(value: float | None) -> float:
    """A number as drawn on a line: NaN (a gap, as matplotlib draws None) for none."""
    drawn = _v(value)
    return math.nan if drawn is None else drawn


def _figure() -> tuple[Figure, Axes]:
    figure = Figure(figsize=(FIGURE_PX[0] / DPI, FIGURE_PX[1] / DPI), dpi=DPI, layout="constrained")
    return figure, figure.add_subplot()


def _png(figure: Figure) -> bytes:
    FigureCanvasAgg(figure)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    return buffer.getvalue()


def _empty(axes: Axes, message: str) -> None:
    axes.text(0.5, 0.5, message, ha="center", va="center", transform=axes.transAxes, fontsize=12, color="#555555")
    axes.set_xticks([])
    axes.set_yticks([])


def _labels(d: RunDiagnostics) -> list[str]:
    return [_text(p.id) for p in d.submissions]


def _scores(d: RunDiagnostics) -> Plot:
    figure, axes = _figure()
    scored = [(p, score) for p in d.submissions if (score := _v(p.score)) is not None]
    points = [p for p, _ in scored]
    if points:
        spent = [p.episodes_spent for p in points]
        axes.plot(spent, [score for _, score in scored], "o", color=_COLOURS[0], label="Submission score")
        axes.step([0, *spent], [_gap(points[0].best_so_far), *[_gap(p.best_so_far) for p in points]], where="pre", color=_COLOURS[1],
                  label="best so far")
        if d.budget_episodes:
            axes.axvline(d.budget_episodes, color="#999999", linestyle=":", label="budget")
        axes.set_xlabel("Episodes spent")
        axes.set_ylabel(_text(d.primary_metric))
        axes.legend(loc="best")
        axes.grid(alpha=0.3)
    else:
        _empty(axes, "no scored Submission")
    axes.set_title("Score of each Submission and the best so far")
    caption = (f"area under the best-so-far curve {_fmt(d.best_so_far_auc)} over {d.episodes_spent} Episodes "
               f"(mean height {_fmt(d.best_so_far_mean)}); direction: {d.direction}")
    return Plot(name="scores", title="Scores against Episodes spent", caption=caption, png=_png(figure))


def _budget(d: RunDiagnostics) -> Plot:
    figure, axes = _figure()
    if d.submissions:
        labels = _labels(d)
        fresh = [p.episodes - p.reused_indices for p in d.submissions]
        reused = [p.reused_indices for p in d.submissions]
        axes.bar(labels, fresh, color=_COLOURS[0], label="new pool indices")
        axes.bar(labels, reused, bottom=fresh, color=_COLOURS[1], label="reused indices")
        axes.set_ylabel("Episodes")
        axes.legend(loc="best")
        axes.tick_params(axis="x", labelrotation=45 if len(labels) > 8 else 0)
    else:
        _empty(axes, "no Submission")
    axes.set_title("Budget: Episodes per Submission")
    budget = f" of {d.budget_episodes}" if d.budget_episodes else ""
    return Plot(name="budget", title="How the budget was spent",
                caption=f"{d.episodes_spent}{budget} Episodes in {len(d.submissions)} Submissions; "
                        f"{sum(p.reused_indices for p in d.submissions)} on reused indices", png=_png(figure))


def _candidates(d: RunDiagnostics) -> Plot:
    figure, axes = _figure()
    if d.candidates:
        width = 0.27
        positions = range(len(d.candidates))
        series = (("train", [_v(c.train_score) for c in d.candidates]), ("Validation", [_v(c.validation_score) for c in d.candidates]),
                  ("Assessment", [_v(c.assessment_score) for c in d.candidates]))
        for offset, (label, values) in enumerate(series):
            xs = [x + (offset - 1) * width for x, v in zip(positions, values, strict=True) if v is not None]
            ys = [v for v in values if v is not None]
            if ys:
                axes.bar(xs, ys, width=width, color=_COLOURS[offset], label=label)
        axes.set_xticks(list(positions), [_text(c.submission_id) + (" (selected)" if c.selected else "") for c in d.candidates])
        axes.axhline(0, color="#333333", linewidth=0.6)
        axes.set_ylabel(_text(d.primary_metric))
        axes.legend(loc="best")
    else:
        _empty(axes, "no Validation candidates")
    axes.set_title("Candidates: train, Validation and Assessment scores")
    caption = f"selected {d.selected or 'none'}; Assessment {_fmt(d.assessment_score)}, starting Program {_fmt(d.initial_assessment_score)}"
    return Plot(name="candidates", title="Validation against Assessment", caption=caption, png=_png(figure))


def _failures(d: RunDiagnostics) -> Plot:
    figure, axes = _figure()
    codes = sorted({code for p in d.submissions for code in p.failure_codes})
    labels = _labels(d)
    if d.submissions:
        bottom = [0] * len(labels)
        completed = [p.episodes - p.policy_failures for p in d.submissions]
        axes.bar(labels, completed, color="#bbbbbb", label="completed")
        bottom = completed
        for i, code in enumerate(codes):
            counts = [p.failure_codes.get(code, 0) for p in d.submissions]
            axes.bar(labels, counts, bottom=bottom, color=_COLOURS[(i + 3) % len(_COLOURS)], label=_text(code))
            bottom = [b + c for b, c in zip(bottom, counts, strict=True)]
        axes.set_ylabel("Episodes")
        axes.legend(loc="best")
        axes.tick_params(axis="x", labelrotation=45 if len(labels) > 8 else 0)
    else:
        _empty(axes, "no Submission")
    axes.set_title("Policy failure codes per Submission")
    total = sum(p.policy_failures for p in d.submissions)
    return Plot(name="failures", title="Failure codes", caption=f"{total} failed Episodes ({', '.join(codes) or 'none'})",
                png=_png(figure))


def _changes(d: RunDiagnostics) -> Plot:
    figure, axes = _figure()
    known = [(p.id, p.change) for p in d.submissions if p.change is not None]
    if known:
        labels = [_text(submission_id) for submission_id, _ in known]
        axes.bar(labels, [change.lines_added for _, change in known], color=_COLOURS[2], label="lines added")
        axes.bar(labels, [-change.lines_removed for _, change in known], color=_COLOURS[3], label="lines removed")
        for x, (_, change) in enumerate(known):
            count = change.files_changed
            axes.annotate(f"{count} file{'' if count == 1 else 's'}", (x, change.lines_added), ha="center", va="bottom", fontsize=8)
        axes.axhline(0, color="#333333", linewidth=0.6)
        axes.set_ylabel("lines")
        axes.legend(loc="best")
        axes.tick_params(axis="x", labelrotation=45 if len(labels) > 8 else 0)
    else:
        _empty(axes, "no readable Program")
    axes.set_title("Program diff against the one before (the first against the starting Program)")
    return Plot(name="changes", title="Program changes", caption="lines added and removed per Submission; files changed above each bar",
                png=_png(figure))


def _gains(d: RunDiagnostics) -> Plot:
    figure, axes = _figure()
    gains = [(p.id, gain) for p in d.submissions if (gain := _v(p.gain)) is not None]
    if gains:
        axes.bar([_text(submission_id) for submission_id, _ in gains], [gain for _, gain in gains], color=_COLOURS[4])
        axes.set_ylabel(_text(f"gain in {d.primary_metric}"))
        axes.axhline(0, color="#333333", linewidth=0.6)
        axes.tick_params(axis="x", labelrotation=45 if len(gains) > 8 else 0)
    else:
        _empty(axes, "fewer than two scored Submissions")
    axes.set_title("Score gain of each Submission over the best before it")
    return Plot(name="gains", title="Score gain per Submission",
                caption=f"mean gain per Submission {_fmt(d.gain_per_submission)} (first score to final best)", png=_png(figure))


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"
