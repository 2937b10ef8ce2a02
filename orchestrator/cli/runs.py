"""`epg-orchestrate spec check | schema` and `runs list | show | report | export | replay`: spec files before a Run, run directories after.

A run directory may come from someone else: what the `runs` commands print of it goes through `cli.untrusted.shown`
(rich markup escaped, control characters made visible), and its records are read through `records.safe_read`.
"""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, NoReturn, Optional

import typer
from rich.table import Table

from orchestrator.cli.common import ExitCode, err, fail, fail_infrastructure, json_mode, out, print_json, usage, with_built_benchmarks
from orchestrator.cli.options import AllowCredential, Base, Environments, Json, Scope, credential_grants, environment_roots
from orchestrator.cli.run import image_checker, require_backend
from orchestrator.cli.terminal import one_line
from orchestrator.kernel.infrastructure import InfrastructureError
from orchestrator.records import safe_read, schema

# The records' models load pydantic: their modules load inside the commands, not with --help.
if TYPE_CHECKING:
    from orchestrator.records.models import RunManifest

spec_app = typer.Typer(help="Check Run spec files.", no_args_is_help=True)
runs_app = typer.Typer(help="Look at run directories.", no_args_is_help=True)

ExistingDirectory = Annotated[Path, typer.Argument(exists=True, file_okay=False, show_default=False)]


@spec_app.command("check")
def spec_check(
    spec_file: Annotated[Path, typer.Argument(help="Run spec (YAML).", exists=True, dir_okay=False, show_default=False)],
    environments: Environments = None,
    as_json: Json = False,
    allow_credential: AllowCredential = None,
) -> None:
    """Check a spec as `run` does before it starts anything; print every problem as `field.path: reason`.

    A valid spec's line is followed by one per credential the model relay would send (`relay: NAME -> HOST (what
    for)`; the JSON's `relay` list), named, never read out. --allow-credential grants what `run` would be given.

    YAML syntax errors print as `line:column: reason`. Exit status: 0 valid, 1 problems, 2 usage,
    3 the engine did not answer (asked only when the spec names an agent image of its own).
    """
    # With pydantic and the relay's HTTP client: loaded by the commands that use them, not by --help.
    from orchestrator.images.catalogue import CatalogueError
    from orchestrator.run.preflight import preflight
    from orchestrator.run.relay_setup import RelayConfigError, credential_routes, with_grants
    from orchestrator.run.spec import SpecError, load_spec

    json_mode(as_json)
    document: dict[str, Any] = {"spec": str(spec_file), "valid": False, "problems": []}
    try:
        spec, _ = load_spec(spec_file)
    except SpecError as exc:
        _report_spec(document | {"problems": exc.problems}, as_json)
    require_backend(spec)
    spec = with_grants(spec, credential_grants(allow_credential))
    try:
        packages = with_built_benchmarks("auto", environments)  # their Benchmarks are named by their images' labels
        problems = preflight(spec, spec_file.resolve().parent, packages, image_exists=image_checker(spec))
    except CatalogueError as exc:
        problems = [f"benchmark: {exc}"]
    except InfrastructureError as exc:
        fail_infrastructure(exc)
    document.update(benchmark=spec.benchmark, agent=spec.agent.kind, episodes=spec.budget.episodes, submissions=spec.budget.max_submissions)
    try:
        document["relay"] = [{"credential": r.credential, "host": r.host, "purpose": r.purpose} for r in credential_routes(spec)]
    except RelayConfigError:
        document["relay"] = []  # a problem already
    _report_spec(document | {"valid": not problems, "problems": problems}, as_json)


def _report_spec(document: dict[str, Any], as_json: bool) -> NoReturn:
    if as_json:
        print_json(document)
    elif document["problems"]:
        for problem in document["problems"]:
            # line:column problems read as file:line:column, the form editors jump to.
            separator = ":" if problem[:1].isdigit() else ": "
            err.print(f"{document['spec']}{separator}{problem}", highlight=False)
    else:
        out.print(f"{document['spec']}: valid ({document['agent']} agent on {document['benchmark']}, {document['episodes']} Episodes)",
                  highlight=False)
        for route in document.get("relay", ()):
            out.print(f"relay: {route['credential'] or 'no credential'} -> {route['host']} ({route['purpose']})",
                      highlight=False, markup=False)
    raise typer.Exit(int(ExitCode.OK if document["valid"] else ExitCode.BAD_INPUT))


@spec_app.command("schema")
def spec_schema() -> None:
    """Print the JSON Schema of spec files."""
    from orchestrator.run.spec import json_schema

    print(json.dumps(json_schema(), indent=2))


def run_summary(directory: Path) -> dict[str, Any]:
    """One row of `runs list`: the fields of run.json it shows, or `error` when run.json cannot be read."""
    from orchestrator.records.run_dir import RunDirectory

    row: dict[str, Any] = {"run": directory.name, "path": str(directory)}
    records = RunDirectory(directory)
    try:
        if records.read_stored_manifest() is None:
            return row | {"error": "no run.json yet (a Run that never started)"}
        manifest = records.read_manifest()
    except schema.RecordError as exc:
        return row | {"error": exc.reason}
    return row | {
        "benchmark": manifest.benchmark, "agent": manifest.agent, "phase": manifest.phase,
        "terminal_reason": manifest.terminal_reason, "assessment_score": manifest.assessment_score,
        "started_at": manifest.started_at, "error": None,
    }


@runs_app.command("list")
def runs_list(
    root: Annotated[Optional[Path], typer.Argument(help="Directory holding run directories (default: runs/).",
                                                   metavar="DIR", exists=True, file_okay=False, show_default=False)] = None,
    as_json: Json = False,
) -> None:
    """List run directories with their phase, terminal reason and assessment score; an unreadable one is marked, not fatal.

    Before the first Run the default `runs/` does not exist: that lists no run (exit 0).
    A DIR given that does not exist is a usage error.
    """
    json_mode(as_json)
    if root is None:
        root = Path("runs")
        if root.exists() and not root.is_dir():
            usage("runs is not a directory: name the directory holding run directories")
    directories = sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink()
                         and ((p / "run.json").exists() or (p / "events.jsonl").exists())) if root.is_dir() else []
    rows = [run_summary(directory) for directory in directories]
    if as_json:
        print_json({"root": str(root), "runs": rows})
        return
    if not rows:
        out.print(f"No runs in {one_line(str(root))}{'' if root.is_dir() else ' (it does not exist yet)'}: "
                  "`epg-orchestrate run SPEC` starts one.", highlight=False)
        return
    table = Table()
    for column in ("run", "benchmark", "agent", "phase", "terminal reason", "assessment"):
        table.add_column(column)
    for row in rows:
        if row["error"]:
            table.add_row(one_line(row["run"]), f"[red]unreadable: {one_line(row['error'])}[/]", "", "", "", "")
            continue
        score = row["assessment_score"]
        table.add_row(one_line(row["run"]), one_line(row["benchmark"]), one_line(row["agent"]), one_line(row["phase"]),
                      one_line(row["terminal_reason"] or "-"), "-" if score is None else f"{score:.3f}")
    out.print(table)


def submission_summary(run_dir: Path, name: str) -> dict[str, Any]:
    """One Submission of `runs show` from submissions/<name>/record.json (read as records.safe_read reads), or `error`
    when the record is unreadable, partial, a link or not a regular file."""
    from orchestrator.records.models import SubmissionRecord, parse

    row: dict[str, Any] = {"id": name}
    relative = f"submissions/{name}/record.json"
    try:
        record = parse(SubmissionRecord, run_dir / relative, safe_read.read_record(run_dir, relative, schema.SUBMISSION))
    except schema.RecordError as exc:
        return row | {"error": exc.reason}
    return row | {"id": record.id or name, "selector": record.selector or "", "score": record.feedback.score,
                  "policy_failures": record.feedback.policy_failures, "program_digest": record.program_digest or "", "error": None}


@runs_app.command("show")
def runs_show(run_dir: ExistingDirectory, as_json: Json = False) -> None:
    """Show one Run: its Submissions, Validation and Assessment; unreadable records are marked, not fatal."""
    from orchestrator.records.run_dir import RunDirectory

    json_mode(as_json)
    records = RunDirectory(run_dir)
    try:
        if records.read_stored_manifest() is None:
            fail(f"{run_dir} is not a run directory (it holds no run.json)")
        manifest = records.read_manifest()
        names = [n for n in safe_read.names(run_dir, "submissions") if not n.startswith(".")]
    except schema.RecordError as exc:
        fail(str(exc))
    submissions = [row for name in names if (row := submission_summary(run_dir, name)).get("error") != "missing"]
    if as_json:
        print_json({"run_dir": str(run_dir), "manifest": manifest.to_json(), "submissions": submissions})
        return
    table = Table(title="Submissions", title_justify="left")
    for column in ("id", "selector", "score", "failures", "program"):
        table.add_column(column)
    for row in submissions:
        if row["error"]:
            table.add_row(one_line(row["id"]), f"[red]unreadable: {one_line(row['error'])}[/]", "", "", "")
        else:
            table.add_row(one_line(row["id"]), one_line(row["selector"]), f"{row['score']:.3f}", str(row["policy_failures"]),
                          one_line(row["program_digest"][:19]))
    out.print(table)
    _print_outcome(run_dir, manifest)
    scores = manifest.validation.scores if manifest.validation is not None else None
    for submission_id, score in (scores or {}).items():
        value = "-" if score is None else f"{score:.3f}"
        out.print(f"validation {one_line(submission_id)}: {value}", highlight=False)


def _print_outcome(run_dir: Path, manifest: RunManifest) -> None:
    """The end of the Run in a few lines, from its run.json (partial or not), every recorded value shown as text."""
    final, assessment = manifest.final, manifest.assessment
    out.print(f"Run directory: {one_line(run_dir)}", highlight=False)
    out.print(f"terminal reason: {one_line(manifest.terminal_reason)}", highlight=False)
    if final is None:
        out.print("no candidate: nothing was assessed", highlight=False)
        return
    out.print(f"selected: {one_line(final.submission_id)} ({one_line(final.program_digest)})", highlight=False)
    score = assessment.score if assessment is not None else None
    out.print(f"[bold]assessment score: {score:.4f}[/]" if score is not None else "assessment: not done", highlight=False)
    if assessment is not None and assessment.initial_program_score is not None:
        out.print(f"starting Program on the same Episodes: {assessment.initial_program_score:.4f}", highlight=False)


@runs_app.command("report")
def runs_report(
    run_dir: ExistingDirectory,
    html: Annotated[Optional[Path], typer.Option("--html", help="Where to write the HTML page (default RUN_DIR/report.html).",
                                                 dir_okay=False, show_default=False)] = None,
    as_json: Json = False,
) -> None:
    """Report one Run: its diagnostics and one self-contained HTML page of plots (scores, budget, candidates, failures, diffs, gains).

    --json prints the diagnostics as one JSON object (the page is written only when --html is given too).
    Exit status: 0 written, 1 not a readable run directory, 2 usage.
    """
    json_mode(as_json)
    from orchestrator.reports.report import report_json, write_html_report  # matplotlib loads only for a page's plots

    try:
        if as_json and html is None:
            document = report_json(run_dir)
        else:
            document = write_html_report(run_dir, html or run_dir / "report.html")
    except schema.RecordError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot write the report: {exc}")
    if as_json:
        print_json(document)
        return
    for problem in document["problems"]:
        err.print(f"[yellow]note:[/] {one_line(problem)}", highlight=False)
    if document.get("plots_left_out"):
        err.print(f"[yellow]note:[/] {one_line(document['plots_left_out'])}", highlight=False)
    out.print(f"{one_line(document['benchmark'])}: {len(document['submissions'])} Submissions, {document['episodes_spent']} Episodes spent, "
              f"selected {one_line(document['selected'] or 'none')}, Assessment {_number(document['assessment_score'])}", highlight=False)
    out.print(f"area under the best-so-far curve {_number(document['best_so_far_auc'])} (mean {_number(document['best_so_far_mean'])}), "
              f"score gain per Submission {_number(document['gain_per_submission'])}", highlight=False)
    out.print(f"report: {one_line(document['html'])}", highlight=False)


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


class ExportFormat(StrEnum):
    JSONL = "jsonl"


# reports.export.ProgramForm's values, spelled out so that --help loads no reports module (a unit test keeps them equal).
ProgramFormName = Literal["files", "diff"]


@runs_app.command("export")
def runs_export(
    run_dir: ExistingDirectory,
    output_format: Annotated[ExportFormat, typer.Option("--format", help="Output format: jsonl (one record per line).")] = ExportFormat.JSONL,
    out_file: Annotated[Optional[Path], typer.Option("--file", help="File to write (default: stdout).",
                                                     dir_okay=False, show_default=False)] = None,
    program: Annotated[ProgramFormName, typer.Option("--program", help="Each Submission's Program as its files, or as a diff against the one before.")]
    = "files",
    as_json: Annotated[bool, typer.Option("--json", help="With --file: print a JSON summary (runs, records, file) on stdout.")] = False,
) -> None:
    """Export a Run (or every Run below a directory, e.g. a suite's) as JSON Lines, one record per step of the agent's evolution.

    Records: the task, each model exchange through the relay, each Submission (Program, selector, receipt, public Feedback)
    and the outcome (Validation, Assessment); schema in docs/export.md. Hidden data never appears.
    Exit status: 0 exported, 1 no run directory there or an unreadable run.json, 2 usage.
    """
    from orchestrator.reports.export import ProgramForm, export_records, find_runs, write_jsonl

    json_mode(as_json)
    if as_json and out_file is None:
        usage("--json needs --file FILE: without it the records themselves go to stdout")
    runs = find_runs(run_dir)
    if not runs:
        fail(f"{run_dir} holds no run directory (no run.json in it or below it)")
    handle = open(out_file, "w", encoding="utf-8") if out_file is not None else sys.stdout
    count = 0
    try:
        for directory in runs:
            name = directory.relative_to(run_dir).as_posix()
            count += write_jsonl(export_records(directory, name=name, program_form=ProgramForm(program)), handle)
    except schema.RecordError as exc:
        fail(str(exc))
    finally:
        if out_file is not None:
            handle.close()
    if as_json:
        print_json({"file": str(out_file), "records": count, "runs": [d.relative_to(run_dir).as_posix() for d in runs]})
    else:
        err.print(f"{count} records of {len(runs)} Run{'s' if len(runs) != 1 else ''}" + (f" written to {out_file}" if out_file else ""),
                  highlight=False)


@runs_app.command("replay")
def runs_replay(
    run_dir: ExistingDirectory,
    targets: Annotated[list[str], typer.Argument(
        help="Submission ids (s0001), assessment (the selected Program's Assessment) or validation (every candidate's).",
        show_default=False, metavar="SUBMISSION...")],
    as_json: Json = False,
    environments: Environments = None,
    base: Base = "auto",
    scope: Scope = "",
) -> None:
    """Evaluate recorded Programs again on the same hidden Episodes and compare with their recorded Feedback, Episode by Episode.

    Uses the Run's seed key (run.json names its file), its limits and, when the engine still has it, its environment image;
    several targets share one sandbox. Exit status: 0 identical, 1 a difference (each printed) or bad input, 2 usage,
    3 infrastructure.
    """
    json_mode(as_json)
    # The engine's client, the compose layer and the Run's spec load only for a replay.
    from orchestrator.images.catalogue import CatalogueError
    from orchestrator.reports.replay import ReplayError
    from orchestrator.reports.rerun import replay_run
    from orchestrator.run.seed_key import SeedKeyError
    from orchestrator.run.spec import SpecError

    try:
        reports, images = replay_run(run_dir, targets, scope=scope, base=base, environments=environment_roots(environments),
                                     progress=lambda message: None if as_json else err.print(f"[dim]{one_line(message)}[/]", highlight=False))
    except (schema.RecordError, ReplayError, SeedKeyError, SpecError, CatalogueError) as exc:
        fail(str(exc))
    except InfrastructureError as exc:
        fail_infrastructure(exc)
    identical = all(report.identical for report in reports)
    if as_json:
        print_json({"run_dir": str(run_dir), "identical": identical, "replays": [r.to_json() for r in reports], "images": images})
    else:
        if not images["same_image"]:
            err.print(f"[yellow]note:[/] the Run's environment image {one_line(images['recorded_environment'])} is gone; "
                      f"replayed on {one_line(images['environment'])}", highlight=False)
        for report in reports:
            for difference in report.differences:
                out.print(f"[red]differs[/] {one_line(report.target)} {one_line(difference.line())}", highlight=False)
            count = len(report.differences)
            verdict = "identical" if report.identical else f"{count} difference{'' if count == 1 else 's'}"
            out.print(f"{one_line(report.target)}: {report.episodes} Episodes of {report.split} replayed against {one_line(', '.join(report.compared))}: "
                      f"{verdict}", highlight=False)
    raise typer.Exit(int(ExitCode.OK if identical else ExitCode.BAD_INPUT))
