"""`epg-orchestrate suite run | report`: many Runs under one protocol, resumable, and the table that ranks the agents."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional, assert_never

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from orchestrator.cli.common import ExitCode, err, fail, fail_infrastructure, json_mode, out, print_json, require_extra, usage, with_built_benchmarks
from orchestrator.cli.options import AllowCredential, Base, Environments, Json, OutputDir, Scope, credential_grants, environment_roots
from orchestrator.cli.run import image_checker, require_backend
from orchestrator.cli.terminal import one_line
from orchestrator.kernel.infrastructure import InfrastructureError
from orchestrator.records import safe_read
from orchestrator.records.schema import RecordError

# The suite package reads spec files with pydantic: its modules load inside the commands, not with --help.
if TYPE_CHECKING:
    from rich.console import JustifyMethod
    from rich.progress import TaskID

    from orchestrator.run.relay_setup import CredentialGrant
    from orchestrator.suite.directory import SuiteDirectory
    from orchestrator.suite.ranking import Standing
    from orchestrator.suite.report import SuiteReport
    from orchestrator.suite.scheduler import RunOutcome
    from orchestrator.suite.spec import SuiteSpec

app = typer.Typer(help="Suites: Benchmarks x agents x repeats under one protocol, and their ranking.", no_args_is_help=True)

SuiteDir = Annotated[Path, typer.Argument(help="Suite directory.", exists=True, file_okay=False, show_default=False)]


@app.command("run")
def run(
    suite_file: Annotated[Optional[Path], typer.Argument(help="Suite file (YAML).", show_default=False, exists=True, dir_okay=False)] = None,
    resume: Annotated[Optional[Path], typer.Option("--resume", help="Continue the suite in this directory.", exists=True, file_okay=False)] = None,
    output: OutputDir = None,
    runs_at_once: Annotated[Optional[int], typer.Option("--runs-at-once", min=1, help="Override the suite's runs_at_once.")] = None,
    as_json: Json = False,
    base: Base = "auto",
    environments: Environments = None,
    scope: Scope = "",
    allow_credential: AllowCredential = None,
) -> None:
    """Run every Run of a suite (each an ordinary run directory under SUITE_DIR/runs), then print the report.

    With --resume, Runs that are done stay done and interrupted ones resume. --allow-credential is passed to every
    Run (give it again with --resume, as for `run --resume`). Exit status: 0 every Run is done,
    1 a bad suite file, a Run that cannot start, or Runs that ended on bad input, 2 usage, 3 a Run that ended
    otherwise (an infrastructure fault, a signal).
    """
    from orchestrator.suite.directory import SuiteBusy, SuiteDirectory
    from orchestrator.suite.report import build_report
    from orchestrator.suite.scheduler import SchedulerOptions, SuiteScheduler
    from orchestrator.suite.spec import MAX_SUITE_BYTES

    json_mode(as_json)
    if (suite_file is None) == (resume is None):
        usage("give a suite file, or --resume SUITE_DIR")
    if resume is not None and output is not None:
        usage("--output names a new suite directory; --resume continues the one given")
    roots = environment_roots(environments)
    grants = credential_grants(allow_credential)
    if resume is not None:
        directory = SuiteDirectory(resume)
        if not directory.exists():
            fail(f"{resume} is not a suite directory (it holds no suite.json)")
        try:
            text = safe_read.read_text(resume, "suite.yaml", MAX_SUITE_BYTES)
        except RecordError as exc:
            fail(str(exc))
        suite = _load(resume / "suite.yaml", text)
    else:
        assert suite_file is not None  # one of the two is given (above)
        suite = _load(suite_file)
        directory = SuiteDirectory(_create(suite_file, suite, output, roots, grants, base, environments))
    options = SchedulerOptions(runs_at_once=runs_at_once or suite.runs_at_once, base=base, environments=roots, scope=scope,
                            allow_credentials=tuple(str(grant) for grant in grants))
    _build_images(directory, base, roots)
    reporter = _Reporter(live=not as_json)
    try:
        with reporter:
            outcomes = SuiteScheduler(directory, options, reporter.notify).execute()
    except (RecordError, SuiteBusy) as exc:
        fail(str(exc))
    report = build_report(directory.root)
    failed = [o for o in outcomes if o.exit_code != 0]
    if not as_json:
        print_report(report)
    if failed or not report.complete:
        # Under --json the one object printed is the error; `suite report --json` still reads the suite.
        bad_input = all(o.exit_code == ExitCode.BAD_INPUT for o in failed)
        code = ExitCode.BAD_INPUT if bad_input else ExitCode.INFRASTRUCTURE
        fail(f"{sum(1 for r in report.runs if r.problems)} Runs are not done; resume with `suite run --resume {directory.root}`",
             code, problems=[f"{o.name}: {o.error}" for o in failed])
    if as_json:
        print_json({"suite_dir": str(directory.root), "invocations": [_outcome_json(o) for o in outcomes], "report": report.to_json()})


def _load(path: Path, text: str | None = None) -> SuiteSpec:
    from orchestrator.suite.spec import SuiteSpecError, load_suite

    try:
        return load_suite(path, text)[0]
    except SuiteSpecError as exc:
        fail(f"{path}: invalid suite", problems=exc.problems)


def _create(suite_file: Path, suite: SuiteSpec, output: Path | None, roots: list[Path] | None,
            grants: list[CredentialGrant], base: str, environments: list[Path] | None) -> Path:
    """Plan the suite, check every Run as `run` would (with the credentials granted, an EvoPolicyGym package's
    Benchmarks named by its built image's label), and write the suite directory; return it."""
    from orchestrator.images.catalogue import CatalogueError
    from orchestrator.run.preflight import preflight  # loaded here, as `run` does: it brings the relay's HTTP client
    from orchestrator.run.relay_setup import with_grants
    from orchestrator.suite.directory import SuiteDirectory
    from orchestrator.suite.spec import SuiteSpecError, plan_suite

    spec_dir = suite_file.resolve().parent
    try:
        packages = with_built_benchmarks(base, environments)  # their Benchmarks are named by their images' labels
        plan = plan_suite(suite, spec_dir, packages)
        for planned in plan:
            require_backend(planned.spec)
        problems = [f"{planned.name}: {problem}" for planned in plan
                    for problem in preflight(with_grants(planned.spec, grants), spec_dir, packages,
                                             image_exists=image_checker(planned.spec))]
    except SuiteSpecError as exc:
        fail(f"{suite_file}: invalid suite", problems=exc.problems)
    except CatalogueError as exc:
        fail(str(exc))
    except InfrastructureError as exc:
        fail_infrastructure(exc)
    root = output or (Path(suite.output) if suite.output else Path("suites") / f"{suite.name}-{time.strftime('%Y%m%d-%H%M%S')}")
    if problems:
        fail(f"{suite_file}: the suite cannot start", problems=problems)
    try:
        SuiteDirectory(root.resolve()).create(suite_file.read_text(), suite.name, spec_dir, plan)
    except FileExistsError as exc:
        fail(str(exc))
    return root.resolve()


def _build_images(directory: SuiteDirectory, base: str, roots: list[Path] | None) -> None:
    """Build (or find) every image the Runs not done yet use, once, before any starts.

    Each Run would ensure its own images; Runs going at once would build the same ones side by side.
    """
    from orchestrator.backends.engine import DockerEngine
    from orchestrator.images.builder import ImageBuilder
    from orchestrator.images.catalogue import CatalogueError, resolve_benchmark
    from orchestrator.images.recipes import policy_image_of
    from orchestrator.run.relay_setup import AGENT_IMAGES
    from orchestrator.run.spec import SpecError, load_spec
    from orchestrator.suite.directory import is_done

    try:
        runs = [r for r in directory.read_manifest().runs if not is_done(directory.run_dir(r))]
        if not runs:
            return
        builder = ImageBuilder(DockerEngine.connect().client, base=base, environments=roots,
                               progress=lambda message: err.print(f"[dim]{message}[/]", highlight=False))
        names: set[str] = set()
        for run in runs:
            if directory.run_problem(run) is not None or safe_read.kind(directory.root, run.spec) != "file":
                continue  # the runner refuses it, saying why
            spec, _ = load_spec(directory.spec_file(run))
            package, _, _ = resolve_benchmark(spec.benchmark, builder.packages())
            names |= {package.image, policy_image_of(package), AGENT_IMAGES.get(spec.agent.kind, "agent-base")}
        if names:  # (an empty list would ask for every image of the catalogue)
            builder.ensure(sorted(names))
    except (RecordError, SpecError, CatalogueError) as exc:
        fail(str(exc))
    except InfrastructureError as exc:
        fail_infrastructure(exc)


def _outcome_json(outcome: RunOutcome) -> dict[str, Any]:
    return {"run": outcome.name, "exit_code": outcome.exit_code, "phase": outcome.phase, "terminal_reason": outcome.terminal_reason,
            "score": outcome.score, "seconds": round(outcome.seconds, 3), "error": outcome.error}


class _Reporter:
    """Progress of a suite on stderr: a line per Run started and ended, a bar for the suite and one per Run going."""

    def __init__(self, live: bool) -> None:
        columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        # No refresh thread: the runner's loop refreshes (its Run processes are started from this one thread).
        self._progress = Progress(*columns, console=err, auto_refresh=False, transient=True, disable=not live)
        self._suite: TaskID | None = None
        self._tasks: dict[str, Any] = {}

    def __enter__(self) -> _Reporter:
        self._progress.__enter__()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self._progress.__exit__(*exc_info)

    def notify(self, kind: str, fields: Mapping[str, Any]) -> None:
        """Show one progress event of the suite scheduler. Raises ValueError for a kind that is not a SuiteProgress or one
        without its fields (records.progress.checked): a wrong kind is an error, never dropped."""
        from orchestrator.records.progress import SuiteProgress, checked

        progress = self._progress
        kind = checked(SuiteProgress, kind, fields)
        if kind is SuiteProgress.PLAN:
            self._suite = progress.add_task("suite: Runs done", total=fields["total"], completed=fields["done"])
            err.print(f"{fields['done']} of {fields['total']} Runs done; {len(fields['waiting'])} to go", highlight=False)
        elif kind is SuiteProgress.STARTED:
            verb = "resumed" if fields["resume"] else "started"
            err.print(f"{one_line(fields['name'])}: {verb}", highlight=False)
            self._tasks[fields["name"]] = progress.add_task(fields["name"], total=None)
        elif kind is SuiteProgress.ENDED:
            outcome: RunOutcome = fields["outcome"]
            task = self._tasks.pop(outcome.name, None)
            if task is not None:
                progress.remove_task(task)
            if outcome.phase == "done" and self._suite is not None:
                progress.advance(self._suite)
                score = "nothing assessed" if outcome.score is None else f"held-out score {outcome.score:.4f}"
                err.print(f"{one_line(outcome.name)}: done in {outcome.seconds:.1f} s, {score} ({one_line(outcome.terminal_reason)})",
                          highlight=False)
            else:
                err.print(f"[yellow]{one_line(outcome.name)}: stopped in phase {one_line(outcome.phase)}: {one_line(outcome.error)}[/]",
                          highlight=False)
        elif kind is SuiteProgress.STOPPING:
            err.print(f"[yellow]{fields['signal']}: stopping {', '.join(fields['runs']) or 'nothing'}[/]", highlight=False)
        elif kind is SuiteProgress.PROGRESS:
            for going in fields["runs"]:
                task = self._tasks.get(going.name)
                if task is not None:
                    progress.update(task, description=f"{going.name}: {going.phase}, {going.submissions} Submissions, "
                                                      f"{going.episodes} Episodes")
            progress.refresh()
        else:
            assert_never(kind)


@app.command("report")
def report(
    suite_dir: SuiteDir,
    as_json: Json = False,
    html_out: Annotated[Optional[Path], typer.Option("--html", help="Also write the report as one self-contained HTML page.",
                                                     dir_okay=False, show_default=False)] = None,
) -> None:
    """The held-out table of a suite, the aggregate rank score, wins and top-2 placings, overall and per family.

    Works on an unfinished suite too (its missing entries rank last and the report says it is incomplete).
    Exit status: 0 a report was made, 1 SUITE_DIR holds no readable suite.json, 2 usage.
    """
    from orchestrator.suite.report import build_report

    json_mode(as_json)
    if html_out is not None:
        require_extra("matplotlib", "suite report --html")  # the page's plots; the table alone needs no extra
    try:
        made = build_report(suite_dir)
    except RecordError as exc:
        fail(str(exc))
    if html_out is not None:
        from orchestrator.suite.html import render_suite_html  # matplotlib only when a page is asked for

        try:
            with safe_read.open_for_writing(html_out.parent, html_out.name, append=False) as handle:  # never through a link
                handle.write(render_suite_html(made).encode("utf-8"))
        except (RecordError, OSError) as exc:
            fail(f"cannot write the page: {exc}")
    if as_json:
        print_json(made.to_json())
    else:
        print_report(made)
        if html_out is not None:
            out.print(f"HTML report: {html_out}", highlight=False)


def print_report(report: SuiteReport) -> None:
    """Standings, per family, the held-out table and the Runs that are not done."""
    out.print(_standings(f"Suite {one_line(report.name)}: aggregate rank score", report.overall))
    if len(report.families) > 1:
        for family, rows in report.families.items():
            out.print(_standings(one_line(family), rows))
    table = Table(title="held-out score (mean ± stdev over repeats, #rank)", title_justify="left")
    table.add_column("Benchmark")
    table.add_column("better")
    for agent in report.agents:
        table.add_column(one_line(agent), justify="right")
    for benchmark in report.benchmarks:
        cells = []
        for agent in report.agents:
            cell = report.cell(benchmark.id, agent)
            text = "none" if cell.mean is None else f"{cell.mean:.4f}"
            if cell.stdev is not None:
                text += f" ± {cell.stdev:.3g}"
            cells.append(f"{text} #{cell.rank}")
        table.add_row(one_line(benchmark.id), "higher" if benchmark.direction == "maximize" else "lower", *cells)
    out.print(table)
    for note in report.notes:
        out.print(f"[yellow]note: {one_line(note)}[/]", highlight=False)
    unfinished = [run for run in report.runs if run.problems]
    if unfinished:
        out.print(f"[yellow]incomplete: {len(unfinished)} of {len(report.runs)} Runs[/]", highlight=False)
        for run in unfinished:
            out.print(f"  {one_line(run.name)}: {one_line('; '.join(run.problems))}", highlight=False)


def _standings(title: str, rows: tuple[Standing, ...]) -> Table:
    table = Table(title=title, title_justify="left")
    columns: tuple[tuple[str, JustifyMethod], ...] = (("#", "right"), ("agent", "left"), ("rank score", "right"), ("wins", "right"),
                                                      ("top-2", "right"), ("Benchmarks", "right"))
    for name, justify in columns:
        table.add_column(name, justify=justify)
    for position, s in enumerate(rows, 1):
        table.add_row(str(position), one_line(s.agent), f"{s.rank_score:.4f}", str(s.wins), str(s.top2), str(s.benchmarks))
    return table
