"""`epg-orchestrate run`: a Run from a spec, or resumed from its run directory."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Callable, Optional, assert_never

import typer

from orchestrator.cli.common import err, fail, fail_infrastructure, json_mode, out, print_json, require_extra, usage, with_built_benchmarks
from orchestrator.cli.options import AllowCredential, Base, Environments, OutputDir, Scope, credential_grants, environment_roots
from orchestrator.kernel.infrastructure import InfrastructureError
from orchestrator.kernel.program import ProgramError
from orchestrator.records.schema import RecordError

# The records' models load pydantic: their modules load inside the command, not with --help.
if TYPE_CHECKING:
    from rich.status import Status

    from orchestrator.records.models import RunManifest
    from orchestrator.run.spec import RunSpec


def run(
    spec_file: Annotated[Optional[Path], typer.Argument(help="Run spec (YAML).", show_default=False, exists=True, dir_okay=False)] = None,
    resume: Annotated[Optional[Path], typer.Option("--resume", help="Continue the Run in this run directory.", exists=True, file_okay=False)] = None,
    output: OutputDir = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the final run.json (with run_dir) instead of progress.")] = False,
    base: Base = "auto",
    environments: Environments = None,
    scope: Scope = "",
    allow_credential: AllowCredential = None,
) -> None:
    """Run an agent against a benchmark under a budget, then validate and assess its candidates.

    It prints which credential (a variable's name or a login, never its value) the model relay sends to which host.
    A credential bound anywhere else than its provider's own host needs --allow-credential NAME@HOST, given again
    with --resume.

    Exit status: 0 the Run ended (whatever its terminal reason), 1 bad spec, Program, key or run directory,
    2 usage, 3 infrastructure (its evidence under RUN_DIR/diagnostics).
    """
    # Loaded here, not with the CLI: --help and every other command would pay for them (the engine's client, grpc,
    # pydantic, the relay's HTTP client).
    from orchestrator.images.catalogue import CatalogueError
    from orchestrator.records.models import RunManifest
    from orchestrator.records.run_dir import RunDirectory
    from orchestrator.run.driver import ParametersChanged, RunDriver, RunOptions
    from orchestrator.run.preflight import preflight, preflight_benchmark
    from orchestrator.run.relay_setup import RelayConfigError, with_grants
    from orchestrator.run.seed_key import SeedKeyError

    json_mode(as_json)
    if (spec_file is None) == (resume is None):
        usage("give a spec file, or --resume RUN_DIR")
    if resume is not None and output is not None:
        usage("--output names a new run directory; --resume continues the one given")
    if resume is not None and not RunDirectory(resume).events_path.exists():
        fail(f"{resume} is not a run directory (it holds no events.jsonl)")
    path = spec_file if spec_file is not None else (resume or Path()) / "spec.yaml"  # one of them is given (above)
    spec, text = load_checked_spec(path)
    require_backend(spec)
    spec = with_grants(spec, credential_grants(allow_credential))
    roots = environment_roots(environments)
    try:
        packages = with_built_benchmarks(base, environments)  # their Benchmarks are named by their images' labels
    except CatalogueError as exc:
        fail(str(exc))
    try:
        if resume is not None:
            run_dir = resume
            spec_dir = Path(RunDirectory(resume).read_manifest().spec_dir or str(resume))
            problems = preflight_benchmark(spec, packages)
        else:
            default = Path("runs") / f"{spec.benchmark.lower()}-{time.strftime('%Y%m%d-%H%M%S')}"
            run_dir = output or (Path(spec.output) if spec.output else default)
            spec_dir = path.resolve().parent
            problems = preflight(spec, spec_dir, packages, run_dir=run_dir, image_exists=image_checker(spec))
    except RecordError as exc:
        fail(str(exc))
    except InfrastructureError as exc:
        fail_infrastructure(exc)
    if problems:
        fail(f"{path}: the Run cannot start", problems=problems)
    print_credential_routes(spec)
    options = RunOptions(spec=spec, spec_text=text, spec_dir=spec_dir, run_dir=run_dir.resolve(), resume=resume is not None,
                         scope=scope, base=base, environments=roots)
    reporter = _Reporter(quiet=as_json)
    try:
        with err.status("starting", spinner="dots") as status:
            reporter.status = status
            manifest = RunManifest.model_validate(RunDriver(options, reporter.notify).execute())
    except (FileExistsError, FileNotFoundError, RelayConfigError, SeedKeyError, RecordError, ParametersChanged) as exc:
        fail(str(exc))
    except ProgramError as exc:
        fail(f"initial Program: {exc.message}")
    except InfrastructureError as exc:
        fail_infrastructure(exc, run_dir / "diagnostics")
    if as_json:
        print_json({"run_dir": str(run_dir), **manifest.to_json()})
    else:
        print_manifest(run_dir, manifest)


def load_checked_spec(path: Path) -> tuple[RunSpec, str]:
    """The spec at path and its text; an invalid one fails the command with one line per problem."""
    from orchestrator.run.spec import SpecError, load_spec

    try:
        return load_spec(path)
    except SpecError as exc:
        fail(f"{path}: invalid spec", problems=exc.problems)


def require_backend(spec: RunSpec) -> None:
    """Fail the command, before anything starts, when the spec's sandbox backend needs an extra that is not installed."""
    if spec.sandbox.backend == "kubernetes":
        require_extra("kubernetes", "sandbox.backend: kubernetes")


def print_credential_routes(spec: RunSpec) -> None:
    """One stderr line per credential the relay of spec sends, and where: `relay: NAME -> HOST (what for)`."""
    from orchestrator.run.relay_setup import RelayConfigError, credential_routes

    try:
        routes = credential_routes(spec)
    except RelayConfigError:
        return  # said as a problem already
    for route in routes:
        err.print(f"relay: {route}", highlight=False, markup=False)


def image_checker(spec: RunSpec) -> Callable[[str], bool] | None:
    """engine.image_exists when the spec names an agent image the orchestrator does not build; else None. Raises InfrastructureError."""
    from orchestrator.backends.engine import DockerEngine
    from orchestrator.run.preflight import BUILT_AGENT_IMAGES
    from orchestrator.run.spec import CommandAgent

    if isinstance(spec.agent, CommandAgent) and spec.agent.image not in BUILT_AGENT_IMAGES:
        return DockerEngine.connect().image_exists
    return None


class _Reporter:
    """Turns Run events into progress lines and a status line (phase, Submissions, budget, best score)."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.best: float | None = None
        self.status: Status | None = None

    def notify(self, kind: str, fields: Mapping[str, Any]) -> None:
        """Show one progress event of the Run. Raises ValueError for a kind that is not a RunProgress or one without its
        fields (records.progress.checked), quiet or not: a wrong kind is an error, never dropped."""
        from orchestrator.records.progress import RunProgress, checked

        kind = checked(RunProgress, kind, fields)
        if self.quiet:
            return
        if kind is RunProgress.NOTE:
            err.print(f"[dim]{fields['message']}[/]", highlight=False)
        elif kind is RunProgress.PHASE:
            err.print(f"[bold]phase: {fields['phase']}[/]")
            if self.status is not None:
                self.status.update(f"{fields['phase']}")
        elif kind is RunProgress.SUBMISSION_STARTED:
            if self.status is not None:
                self.status.update(f"agent: evaluating {fields['id']} on {fields['episodes']} Episodes")
        elif kind is RunProgress.SUBMISSION_COMPLETED:
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
        elif kind is RunProgress.SUBMISSION_VOIDED:
            err.print(f"[yellow]{fields['id']} voided: {fields['reason']}[/]", highlight=False)
        elif kind is RunProgress.FINISHED:
            err.print(f"agent finished with candidates {', '.join(fields['candidates'])}")
        elif kind is RunProgress.VALIDATED:
            err.print(f"validation: {fields['id']} scored {fields['score']:.3f}")
        elif kind is RunProgress.ASSESSED:
            err.print(f"assessment: {fields['score']:.3f}")
        else:
            assert_never(kind)


def print_manifest(run_dir: Path, manifest: RunManifest) -> None:
    """The end of a Run in a few lines; tolerant of a partial run.json."""
    final, assessment = manifest.final, manifest.assessment
    out.print(f"Run directory: {run_dir}")
    out.print(f"terminal reason: {manifest.terminal_reason}")
    if final is not None:
        out.print(f"selected: {final.submission_id} ({final.program_digest})")
        score = assessment.score if assessment is not None else None
        out.print(f"[bold]assessment score: {score:.4f}[/]" if score is not None else "assessment: not done")
        if assessment is not None and assessment.initial_program_score is not None:
            out.print(f"starting Program on the same Episodes: {assessment.initial_program_score:.4f}")
    else:
        out.print("no candidate: nothing was assessed")
