"""`epg-orchestrate evopolicygym sweep CHECKOUT`: every EvoPolicyGym package of a checkout built, checked and its
baseline evaluated, each step a subprocess of our own CLI; the results in sweep.json and sweep.md.

A package goes through three steps in order, `images build` of its image, `env test` of its directory and `evaluate`
of its baseline Program on its first Benchmark, and stops at the first that fails: its status is `passed`,
`build_failed`, `env_test_failed`, `evaluate_failed` or `timeout` (a step that did not end within its timeout, then
stopped). Each step runs as `python -m orchestrator.cli.app ...` (or the command of `--cli`/`EPG_SWEEP_CLI`, which
the tests point at a stub) with a timeout, so one package's crash or hang costs that package alone. sweep.json is
written after every package, so a stopped sweep resumes where it was: a package recorded as passed is not run again
unless `--again`.
"""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from orchestrator.cli.common import ExitCode, err, fail, json_mode, print_json
from orchestrator.cli.options import Base, Json, OutputDir
from orchestrator.cli.terminal import plain

app = typer.Typer(help="Run EvoPolicyGym 0.3 environment packages here.", no_args_is_help=True)

SCHEMA = "epg-orchestrator/evopolicygym-sweep/v1"
STATUSES = ("passed", "build_failed", "env_test_failed", "evaluate_failed", "timeout")
# Their layout is environments/<family>/<group>/<package>; one level more than that is searched.
MAX_DEPTH = 4
REASON_LINES = 12
REASON_CHARS = 2_000
TABLE_REASON_CHARS = 240
LOG_TAIL_BYTES = 64 * 1024
STOP_GRACE_S = 30.0
_SKIPPED_DIRS = frozenset({"node_modules", "__pycache__", "build", "dist", "venv"})
_REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


@dataclass(frozen=True, slots=True, kw_only=True)
class SweepPackage:
    """One EvoPolicyGym package of a checkout: its directory, its path below the search root, family and module."""

    root: Path
    path: str  # relative to the searched directory, e.g. gymnasium/classic_control/cartpole
    family: str  # the first component of path, e.g. gymnasium
    module: str  # the import package its wheel ships, e.g. cartpole

    @property
    def baseline(self) -> Path:
        return self.root / "src" / self.module / "programs" / "baseline"


@dataclass(frozen=True, slots=True, kw_only=True)
class StepRun:
    """How one step's subprocess ended: exit code (None when it timed out), what it printed, its wall time."""

    step: str
    exit_code: int | None
    stdout: str
    stderr: str
    seconds: float


@dataclass(frozen=True, slots=True, kw_only=True)
class PackageResult:
    """A package's line of sweep.json and of the table."""

    package: str
    path: str
    family: str
    status: str
    benchmarks: list[str] = field(default_factory=list)
    baseline_mean: float | None = None
    seconds: float = 0.0
    reason: str = ""
    steps: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> PackageResult:
        """Read a line of sweep.json back. Raises ValueError for one that is not a package result."""
        try:
            result = cls(package=str(document["package"]), path=str(document["path"]), family=str(document["family"]),
                         status=str(document["status"]), benchmarks=[str(b) for b in document.get("benchmarks") or []],
                         baseline_mean=None if document.get("baseline_mean") is None else float(document["baseline_mean"]),
                         seconds=float(document.get("seconds") or 0.0), reason=str(document.get("reason") or ""),
                         steps=list(document.get("steps") or []))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a package result: {exc}") from None
        if result.status not in STATUSES:
            raise ValueError(f"unknown status {result.status!r}")
        return result


# --- finding the packages ------------------------------------------------------------------------------------------


def find_packages(checkout: Path, max_depth: int = MAX_DEPTH) -> list[SweepPackage]:
    """Return the EvoPolicyGym packages of checkout, sorted by path: the catalogue's (`find_package_dirs`, the kernel's
    own pyproject.toml and our packages left out) in checkout/environments when it exists, else in checkout itself
    (which may be one package), at most max_depth levels down. Raises CatalogueError for a package it cannot read.
    """
    from orchestrator.images.catalogue import find_package_dirs, load_package

    base = checkout / "environments" if (checkout / "environments").is_dir() else checkout
    found: list[SweepPackage] = []
    for root in find_package_dirs(base, max_depth):
        package = load_package(root)
        if package.evopolicygym is None:
            continue
        relative = root.relative_to(base) if root != base else Path(base.name)
        family = relative.parts[0] if len(relative.parts) > 1 else relative.name
        found.append(SweepPackage(root=root, path=relative.as_posix(), family=family, module=package.table.module))
    return sorted(found, key=lambda package: package.path)


def selected(packages: Sequence[SweepPackage], patterns: Sequence[str]) -> list[SweepPackage]:
    """The packages whose path or directory name matches one of the glob patterns (all of them without patterns)."""
    if not patterns:
        return list(packages)
    return [p for p in packages if any(fnmatch.fnmatchcase(p.path, g) or fnmatch.fnmatchcase(p.root.name, g) for g in patterns)]


def image_name(package: SweepPackage) -> str:
    """The name of the package's environment image, as the catalogue finds it in the package's directory;
    `env-epg-<directory>` when the catalogue finds no package there or cannot read it (then `images build` says why)."""
    from orchestrator.images.catalogue import CatalogueError, discover  # pydantic: loaded by the command only

    try:
        found = [p for p in discover([package.root], installed=False) if p.root.resolve() == package.root.resolve()]
    except CatalogueError:
        found = []
    if len(found) == 1:
        return found[0].table.image
    return "env-epg-" + re.sub(r"[^a-z0-9]+", "-", package.root.name.lower()).strip("-")


# --- one step, one package -----------------------------------------------------------------------------------------


class SweepStopped(Exception):
    """The sweep is stopping: no further step starts."""


class StepRunner:
    """Runs the steps' subprocesses and knows which are running, so an interrupted sweep stops them all."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: set[subprocess.Popen[str]] = set()
        self._stopped = False

    def __call__(self, command: Sequence[str], step: str, timeout_s: float) -> StepRun:
        """Run command and return how it ended. On timeout it gets SIGTERM (our CLI then removes what it started),
        then SIGKILL after STOP_GRACE_S; its exit_code is then None. Raises SweepStopped after stop_all, OSError when
        command cannot be started."""
        started = time.monotonic()
        with self._lock:
            if self._stopped:
                raise SweepStopped()
            process = subprocess.Popen(list(command), stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                       text=True, errors="replace")
            self._running.add(process)
        try:
            stdout, stderr = process.communicate(timeout=timeout_s)
            exit_code: int | None = process.returncode
        except subprocess.TimeoutExpired:
            _terminate(process)
            stdout, stderr = process.communicate()
            exit_code = None
        except BaseException:
            _terminate(process)  # Ctrl-C or SIGTERM in this thread: the step does not outlive the sweep
            raise
        finally:
            with self._lock:
                self._running.discard(process)
        return StepRun(step=step, exit_code=exit_code, stdout=stdout, stderr=stderr, seconds=time.monotonic() - started)

    @property
    def stopped(self) -> bool:
        return self._stopped

    def stop_all(self) -> None:
        """Start no further step, and stop every step still running (each thread still reads its own output)."""
        with self._lock:
            self._stopped = True
            running = list(self._running)
        for process in running:
            _terminate(process)


def _terminate(process: subprocess.Popen[str]) -> None:
    """SIGTERM (our CLI then removes every container it started), SIGKILL if it has not ended after STOP_GRACE_S."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def tail(text: str, lines: int = REASON_LINES, chars: int = REASON_CHARS) -> str:
    """The last lines of text (blank ones dropped), at most chars characters of them."""
    kept = "\n".join([line.rstrip() for line in text.splitlines() if line.strip()][-lines:])
    return kept if len(kept) <= chars else "..." + kept[-(chars - 3):]


def _json_of(run: StepRun) -> dict[str, Any] | None:
    lines = run.stdout.strip().splitlines()
    try:
        document = json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        return None
    return document if isinstance(document, dict) else None


def _failure_reason(run: StepRun, timeout_s: float) -> str:
    document = _json_of(run)
    if run.exit_code is None:
        head = f"{run.step} did not end within {timeout_s:g} s"
        rest = tail(run.stderr or run.stdout)
        return f"{head}: {rest}" if rest else head
    if document is not None:
        error = document.get("error")
        if isinstance(error, dict) and error.get("message"):
            return tail(f"{error['message']}\n" + "\n".join(map(str, error.get("problems") or [])))
        failed = [f"{c.get('benchmark')}: {c.get('name')}: {c.get('detail')}" for c in document.get("checks") or []
                  if isinstance(c, dict) and not c.get("ok")]
        if failed:
            return tail("\n".join(failed))
    return tail(run.stderr) or tail(run.stdout) or f"{run.step} exited with status {run.exit_code}"


@dataclass(frozen=True, slots=True, kw_only=True)
class SweepSettings:
    """What every package's steps are run with."""

    cli: tuple[str, ...]
    out: Path
    episodes: int
    base: str
    build_timeout_s: float
    timeout_s: float


def sweep_package(package: SweepPackage, settings: SweepSettings, runner: Callable[[Sequence[str], str, float], StepRun]) -> PackageResult:
    """Build, check and evaluate one package, stopping at the first step that fails; return its result.

    Each step's output tail is kept in OUT/logs/<path>/<step>.log. Raises OSError when OUT cannot be written.
    """
    logs = settings.out / "logs" / package.path
    logs.mkdir(parents=True, exist_ok=True)
    result = PackageResult(package=package.root.name, path=package.path, family=package.family, status="passed")
    environments = ("--environments", str(package.root))
    base = ("--base", settings.base)
    plan: list[tuple[str, str, list[str], float]] = [
        ("images build", "build_failed", ["images", "build", image_name(package), *environments, *base, "--json"],
         settings.build_timeout_s),
        ("env test", "env_test_failed", ["env", "test", str(package.root), "-n", str(settings.episodes), *environments, *base,
                                         "--json"], settings.timeout_s),
    ]
    for step, failed_status, arguments, timeout_s in plan:
        run = runner([*settings.cli, *arguments], step, timeout_s)
        result = _with_step(result, run, logs)
        if run.exit_code != 0:
            return replace(result, status="timeout" if run.exit_code is None else failed_status, reason=_failure_reason(run, timeout_s))
        if step == "env test":
            report = _json_of(run) or {}
            result = replace(result, benchmarks=[str(b) for b in report.get("benchmarks") or []])
    if not result.benchmarks:
        return replace(result, status="env_test_failed", reason="env test listed no Benchmark of the package")
    if not (package.baseline / "policy.py").is_file():
        return replace(result, status="evaluate_failed", reason=f"no baseline Program: {package.baseline.relative_to(package.root)}/policy.py is missing")
    arguments = ["evaluate", str(package.baseline), "--benchmark", result.benchmarks[0], "--episodes", str(settings.episodes),
                 *environments, *base, "--out", str(settings.out / "evaluations" / package.path), "--json"]
    run = runner([*settings.cli, *arguments], "evaluate", settings.timeout_s)
    result = _with_step(result, run, logs)
    if run.exit_code != 0:
        return replace(result, status="timeout" if run.exit_code is None else "evaluate_failed", reason=_failure_reason(run, settings.timeout_s))
    score = (_json_of(run) or {}).get("score")
    if isinstance(score, bool) or not isinstance(score, (int, float)):
        return replace(result, status="evaluate_failed", reason="evaluate printed no score: " + tail(run.stdout + run.stderr, lines=3))
    return replace(result, baseline_mean=float(score))


def _with_step(result: PackageResult, run: StepRun, logs: Path) -> PackageResult:
    log = f"$ {run.step} (exit {run.exit_code}, {run.seconds:.1f} s)\n--- stdout\n{run.stdout}\n--- stderr\n{run.stderr}"
    (logs / f"{run.step.replace(' ', '-')}.log").write_text(log[-LOG_TAIL_BYTES:])
    step = {"step": run.step, "exit_code": run.exit_code, "seconds": round(run.seconds, 3)}
    return replace(result, seconds=round(result.seconds + run.seconds, 3), steps=[*result.steps, step])


# --- the records ---------------------------------------------------------------------------------------------------


def read_results(out: Path) -> dict[str, PackageResult]:
    """The results sweep.json in out holds, by package path; none when it is absent. Raises ValueError for a file
    that is not a sweep's."""
    path = out / "sweep.json"
    if not path.is_file():
        return {}
    try:
        document = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: {exc}") from None
    if not isinstance(document, dict) or document.get("schema") != SCHEMA or not isinstance(document.get("packages"), list):
        raise ValueError(f"{path}: not a sweep record (schema {SCHEMA})")
    results = {}
    for index, line in enumerate(document["packages"]):
        try:
            result = PackageResult.from_json(line)
        except (ValueError, AttributeError) as exc:
            raise ValueError(f"{path}: packages[{index}]: {exc}") from None
        results[result.path] = result
    return results


def counts(results: Sequence[PackageResult]) -> dict[str, int]:
    """How many packages ended in each status (every status named, zeros included)."""
    return {status: sum(1 for r in results if r.status == status) for status in STATUSES}


def sweep_document(checkout: Path, episodes: int, results: Sequence[PackageResult]) -> dict[str, Any]:
    """sweep.json's document: the checkout, the Episodes, the count of each status and the results by path."""
    ordered = sorted(results, key=lambda r: r.path)
    return {"schema": SCHEMA, "checkout": str(checkout), "episodes": episodes, "counts": counts(ordered),
            "packages": [r.to_json() for r in ordered]}


def _cell(text: str, limit: int = TABLE_REASON_CHARS) -> str:
    """Text for one Markdown table cell: one line, pipes escaped, at most limit characters."""
    flat = " ".join(text.split())
    if len(flat) > limit:
        flat = flat[:limit - 3] + "..."
    return flat.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;")


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _benchmarks_cell(benchmarks: Sequence[str]) -> str:
    if not benchmarks:
        return "-"
    shown = ", ".join(benchmarks[:3])
    return f"{shown} (+{len(benchmarks) - 3} more)" if len(benchmarks) > 3 else shown


def sweep_table(results: Sequence[PackageResult]) -> str:
    """sweep.md's table: one row per package, by family then path; of a reason, its last line (the error; sweep.json
    has the whole reason)."""
    lines = ["| package | family | benchmarks | status | baseline mean | time | reason |", "|---|---|---|---|---|---|---|"]
    for r in sorted(results, key=lambda r: (r.family, r.path)):
        mean = "-" if r.baseline_mean is None else f"{r.baseline_mean:.4g}"
        lines.append(f"| {_cell(r.path)} | {_cell(r.family)} | {_cell(_benchmarks_cell(r.benchmarks))} | {r.status} | {mean} | "
                     f"{r.seconds:.0f} s | {_cell(_last_line(r.reason)) or '-'} |")
    return "\n".join(lines) + "\n"


def sweep_markdown(checkout: Path, episodes: int, results: Sequence[PackageResult]) -> str:
    """sweep.md: a heading, how many packages passed and how the others ended, then sweep_table."""
    tally = counts(results)
    others = ", ".join(f"{n} {status}" for status, n in tally.items() if status != "passed" and n)
    return (f"# EvoPolicyGym sweep\n\nCheckout `{checkout}`, baseline evaluated on {episodes} Episodes.\n\n"
            f"**{tally['passed']} of {len(results)} packages passed**{': ' + others if others else ''}.\n\n" + sweep_table(results))


def write_records(out: Path, checkout: Path, episodes: int, results: Sequence[PackageResult]) -> None:
    """Write sweep.json and sweep.md into out, each replaced whole (a stopped sweep leaves the last complete pair).
    Raises OSError."""
    from orchestrator.records.atomic import PUBLIC_FILE, write_bytes, write_json

    write_json(out / "sweep.json", sweep_document(checkout, episodes, results), mode=PUBLIC_FILE)
    write_bytes(out / "sweep.md", sweep_markdown(checkout, episodes, results).encode(), mode=PUBLIC_FILE)


# --- the command ---------------------------------------------------------------------------------------------------


def _cli_command(value: str) -> tuple[str, ...]:
    return tuple(shlex.split(value)) if value.strip() else (sys.executable, "-m", "orchestrator.cli.app")


@app.command("sweep")
def sweep(
    checkout: Annotated[Path, typer.Argument(help="A checkout of EvoPolicyGym (its environments/ is searched) or a directory of its packages.",
                                             exists=True, file_okay=False, show_default=False)],
    out_dir: OutputDir = None,
    only: Annotated[Optional[list[str]], typer.Option("--only", help="Only packages whose path or name matches this glob (repeatable).",
                                                      show_default=False)] = None,
    episodes: Annotated[int, typer.Option("--episodes", "-n", min=1, max=1_000, help="Episodes of env test's baseline run and of the evaluation.")] = 3,
    jobs: Annotated[int, typer.Option("--jobs", "-j", min=1, max=64, help="Packages swept at once.")] = 1,
    again: Annotated[bool, typer.Option("--again", help="Sweep packages already recorded as passed too.")] = False,
    build_timeout: Annotated[float, typer.Option("--build-timeout", min=1.0, help="Seconds allowed for a package's image build.")] = 3600.0,
    timeout: Annotated[float, typer.Option("--timeout", min=1.0, help="Seconds allowed for its env test, and for its evaluation.")] = 1800.0,
    cli: Annotated[str, typer.Option("--cli", envvar="EPG_SWEEP_CLI", show_default=False,
                                     help="The command each step runs instead of `python -m orchestrator.cli.app` (tests give a stub).")] = "",
    base: Base = "auto",
    as_json: Json = False,
) -> None:
    """Build, check (env test) and evaluate the baseline of every EvoPolicyGym package of CHECKOUT; write sweep.json and
    sweep.md (package, family, benchmarks, status, baseline mean, time, reason) into --out.

    --out defaults to ./evopolicygym-sweep; it also holds each step's log tail (logs/) and each evaluation's records
    (evaluations/). Resumable: packages recorded there as passed are skipped unless --again.
    Exit status: 0 every selected package passed, 1 one did not (or a bad checkout or record), 2 usage, 3 a step's
    command could not be started or --out written.
    """
    json_mode(as_json)
    out_dir = out_dir or Path("evopolicygym-sweep")
    from orchestrator.images.catalogue import CatalogueError

    try:
        packages = selected(find_packages(checkout), only or ())
    except CatalogueError as exc:
        fail(str(exc))
    if not packages:
        fail(f"no EvoPolicyGym package in {checkout}" + (f" matches {', '.join(only)}" if only else "")
             + " (a directory whose pyproject.toml depends on evopolicygym)")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        results = read_results(out_dir)
    except (OSError, ValueError) as exc:
        fail(str(exc))
    settings = SweepSettings(cli=_cli_command(cli), out=out_dir, episodes=episodes, base=base, build_timeout_s=build_timeout,
                             timeout_s=timeout)
    pending = [p for p in packages if again or p.path not in results or results[p.path].status != "passed"]
    try:
        _sweep(pending, settings, results, checkout, jobs, quiet=as_json)
    except OSError as exc:  # the step command cannot be started, or --out cannot be written
        fail(f"the sweep stopped: {exc}", ExitCode.INFRASTRUCTURE)
    mine = [results[p.path] for p in packages]
    if as_json:
        print_json(sweep_document(checkout, episodes, mine))
    else:
        tally = counts(mine)
        err.print(plain(f"{tally['passed']} of {len(mine)} packages passed; {out_dir / 'sweep.md'}"))
    if any(r.status != "passed" for r in mine):
        raise typer.Exit(int(ExitCode.BAD_INPUT))


def _sweep(pending: list[SweepPackage], settings: SweepSettings, results: dict[str, PackageResult], checkout: Path, jobs: int,
           *, quiet: bool) -> None:
    """Sweep the pending packages, jobs at once, recording each result in results and on disk as it ends."""
    lock = threading.Lock()
    runner = StepRunner()
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err, transient=True, disable=quiet) as progress:
        task = progress.add_task("EvoPolicyGym packages", total=len(pending))

        def one(package: SweepPackage) -> None:
            result = sweep_package(package, settings, runner)
            if runner.stopped:
                return  # a step was stopped by the sweep's own end: nothing to record, the package is swept again
            with lock:
                results[package.path] = result
                write_records(settings.out, checkout, settings.episodes, list(results.values()))
                progress.advance(task)
                if not quiet:
                    mean = "" if result.baseline_mean is None else f", baseline mean {result.baseline_mean:.4g}"
                    progress.console.print(plain(f"{package.path}: {result.status}{mean} ({result.seconds:.0f} s)",
                                                 "green" if result.status == "passed" else "red"))

        pool = ThreadPoolExecutor(max_workers=jobs)
        try:
            for future in [pool.submit(one, package) for package in pending]:
                future.result()
        except BaseException:
            # Ctrl-C, SIGTERM (which main turns into KeyboardInterrupt): the steps under way stop and clean up first.
            pool.shutdown(wait=False, cancel_futures=True)
            runner.stop_all()
            raise
        finally:
            pool.shutdown(wait=True)

