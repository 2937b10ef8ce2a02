"""`epg-orchestrate run`, `spec check | schema` and `runs list | show`."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.table import Table

from orchestrator.cli.common import err, fail, fail_infrastructure, out
from orchestrator.cli.options import Base, Environments, Scope, environment_roots
from orchestrator.images.catalogue import CatalogueError, discover, resolve_benchmark
from orchestrator.kernel.codes import InfrastructureError
from orchestrator.kernel.program import ProgramError
from orchestrator.records.run_dir import RunDirectory
from orchestrator.run.driver import RunDriver, RunOptions
from orchestrator.run.relay_setup import RelayConfigError
from orchestrator.run.seed_key import SeedKeyError
from orchestrator.run.spec import SpecError, json_schema, load_spec

spec_app = typer.Typer(help="Check Run spec files.", no_args_is_help=True)
runs_app = typer.Typer(help="Look at run directories.", no_args_is_help=True)


def run(
    spec_file: Annotated[Optional[Path], typer.Argument(help="Run spec (YAML).", show_default=False)] = None,
    resume: Annotated[Optional[Path], typer.Option("--resume", help="Continue the Run in this run directory.")] = None,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Run directory (overrides the spec's output).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the final run.json instead of progress.")] = False,
    base: Base = "auto",
    environments: Environments = None,
    scope: Scope = "",
) -> None:
    """Run an agent against a benchmark under a budget, then validate and assess its candidates."""
    if (spec_file is None) == (resume is None):
        fail("give a spec file, or --resume RUN_DIR")
    path = spec_file if spec_file is not None else resume / "spec.yaml"
    try:
        spec, text = load_spec(path)
    except SpecError as exc:
        fail("invalid spec:\n" + "\n".join(f"  {p}" for p in exc.problems))
    roots = environment_roots(environments)
    try:
        resolve_benchmark(spec.benchmark, discover(roots))
    except CatalogueError as exc:
        fail(f"benchmark: {exc}")
    if resume is not None:
        run_dir = resume
        spec_dir = Path(RunDirectory(resume).read_manifest().get("spec_dir", str(resume)))
    else:
        default = Path("runs") / f"{spec.benchmark.lower()}-{time.strftime('%Y%m%d-%H%M%S')}"
        run_dir = output or (Path(spec.output) if spec.output else default)
        spec_dir = path.resolve().parent
    options = RunOptions(spec=spec, spec_text=text, spec_dir=spec_dir, run_dir=run_dir.resolve(), resume=resume is not None,
                         scope=scope, base=base, environments=roots)
    reporter = _Reporter(quiet=as_json)
    try:
        with err.status("starting", spinner="dots") as status:
            reporter.status = status
            manifest = RunDriver(options, reporter.notify).execute()
    except (FileExistsError, FileNotFoundError, RelayConfigError, SeedKeyError) as exc:
        fail(str(exc))
    except ProgramError as exc:
        fail(f"initial Program: {exc.message}")
    except InfrastructureError as exc:
        fail_infrastructure(exc, run_dir / "diagnostics")
    RunDirectory(run_dir).update_manifest(spec_dir=str(spec_dir))
    if as_json:
        print(json.dumps({"run_dir": str(run_dir), **manifest}))
    else:
        _print_manifest(run_dir, manifest)


class _Reporter:
    """Turns Run events into progress lines and a status line (phase, Submissions, budget, best score)."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.best: float | None = None
        self.status = None

    def notify(self, kind: str, fields: dict[str, Any]) -> None:
        if self.quiet:
            return
        if kind == "note":
            err.print(f"[dim]{fields['message']}[/]", highlight=False)
        elif kind == "phase":
            err.print(f"[bold]phase: {fields['phase']}[/]")
            if self.status is not None:
                self.status.update(f"{fields['phase']}")
        elif kind == "submission_started":
            if self.status is not None:
                self.status.update(f"agent: evaluating {fields['id']} on {fields['episodes']} Episodes")
        elif kind == "submission_completed":
            status = fields["status"]
            score = fields["score"]
            better = min if fields["direction"] == "minimize" else max
            self.best = score if self.best is None else better(self.best, score)
            err.print(
                f"{fields['id']}  score {score:10.3f}   best {self.best:10.3f}   "
                f"Episodes left {status.episodes_left}/{status.episodes_total}   Submissions left {status.submissions_left}",
                highlight=False,
            )
            if self.status is not None:
                self.status.update(f"agent: {status.submissions_used} Submissions, {status.episodes_left} Episodes left, best {self.best:.3f}")
        elif kind == "submission_voided":
            err.print(f"[yellow]{fields['id']} voided: {fields['reason']}[/]", highlight=False)
        elif kind == "finished":
            err.print(f"agent finished with candidates {', '.join(fields['candidates'])}")
        elif kind == "validated":
            err.print(f"validation: {fields['id']} scored {fields['score']:.3f}")
        elif kind == "assessed":
            err.print(f"assessment: {fields['score']:.3f}")


def _print_manifest(run_dir: Path, manifest: dict[str, Any]) -> None:
    final = manifest.get("final") or {}
    assessment = manifest.get("assessment") or {}
    out.print(f"Run directory: {run_dir}")
    out.print(f"terminal reason: {manifest.get('terminal_reason')}")
    if final:
        out.print(f"selected: {final['submission_id']} ({final['program_digest']})")
        out.print(f"[bold]assessment score: {assessment.get('score', float('nan')):.4f}[/]")
        if "initial_program_score" in assessment:
            out.print(f"starting Program on the same Episodes: {assessment['initial_program_score']:.4f}")
    else:
        out.print("no candidate: nothing was assessed")


@spec_app.command("check")
def spec_check(spec_file: Path) -> None:
    """Validate a spec file; print every problem with its field path."""
    try:
        spec, _ = load_spec(spec_file)
    except SpecError as exc:
        for problem in exc.problems:
            err.print(f"{spec_file}: {problem}", highlight=False)
        raise typer.Exit(1) from None
    out.print(f"{spec_file}: valid ({spec.agent.kind} agent on {spec.benchmark}, {spec.budget.episodes} Episodes)")


@spec_app.command("schema")
def spec_schema() -> None:
    """Print the JSON Schema of spec files."""
    print(json.dumps(json_schema(), indent=2))


@runs_app.command("list")
def runs_list(root: Annotated[Path, typer.Argument(help="Directory holding run directories.")] = Path("runs")) -> None:
    """List run directories with their phase, terminal reason and assessment score."""
    table = Table()
    for column in ("run", "benchmark", "agent", "phase", "terminal reason", "assessment"):
        table.add_column(column)
    for directory in sorted(p for p in root.glob("*") if (p / "run.json").exists()):
        manifest = RunDirectory(directory).read_manifest()
        score = (manifest.get("assessment") or {}).get("score")
        table.add_row(directory.name, str(manifest.get("benchmark")), str(manifest.get("agent")), str(manifest.get("phase")),
                      str(manifest.get("terminal_reason") or "-"), "-" if score is None else f"{score:.3f}")
    out.print(table)


@runs_app.command("show")
def runs_show(run_dir: Path) -> None:
    """Show one Run: its Submissions, Validation and Assessment."""
    records = RunDirectory(run_dir)
    manifest = records.read_manifest()
    if not manifest:
        fail(f"{run_dir} is not a run directory")
    table = Table(title="Submissions", title_justify="left")
    for column in ("id", "selector", "score", "failures", "program"):
        table.add_column(column)
    for record_path in sorted((run_dir / "submissions").glob("*/record.json")):
        record = json.loads(record_path.read_text())
        failures = sum(1 for e in record["feedback"]["episodes"] if e["failure"])
        table.add_row(record["id"], record["selector"], f"{record['feedback']['score']:.3f}", str(failures), record["program_digest"][:19])
    out.print(table)
    _print_manifest(run_dir, manifest)
    validation = manifest.get("validation") or {}
    for submission_id, score in (validation.get("scores") or {}).items():
        out.print(f"validation {submission_id}: {score:.3f}")
