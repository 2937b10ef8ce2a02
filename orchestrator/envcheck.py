"""An environment image checked in isolation, as library code: `check_environment` returns an EnvReport.

The target is an image reference (repo:tag or an image id the engine holds), a
Benchmark name of the catalogue (its image is built if needed) or an
environment package's source directory (built with the image builder). Every
Benchmark the image holds is checked inside it (`python3 -m epg_sdk.checks`),
then a baseline Program runs through the real sandbox with that very image.
"""

from __future__ import annotations

import io
import json
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from orchestrator.backends.container_spec import ContainerSpec
from orchestrator.backends.engine import DockerEngine
from orchestrator.backends.labels import BASELINE, BENCHMARKS, sandbox_labels
from orchestrator.backends.settings import SandboxTuning
from orchestrator.images.builder import ImageBuilder
from orchestrator.images.catalogue import (
    CatalogueError,
    EnvironmentPackage,
    is_package_dir,
    label_benchmarks,
    load_package,
    resolve_benchmark,
    with_discovered,
)
from orchestrator.kernel.evaluation import evaluate_program
from orchestrator.kernel.infrastructure import InfrastructureError
from orchestrator.kernel.program import Program, ProgramError, capture_program
from orchestrator.orphans import reap_orphans
from orchestrator.sandbox_opening import SandboxSetup, benchmark_images, open_sandbox

Progress = Callable[[str], None]

CHECK_TIMEOUT_S = 600.0
BASELINE_CHECK = "baseline runs through the sandbox"
CHECKS_RUN = "conformance checks run inside the image"


class EnvCheckError(Exception):
    """The target names no image, Benchmark or environment package, or the package is malformed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvCheck:
    benchmark: str
    name: str
    ok: bool
    detail: str = ""
    finished: bool = True  # False: the check did not finish in time, so nothing is known (an infrastructure outcome)


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvReport:
    image: str
    image_id: str
    benchmarks: tuple[str, ...]
    checks: tuple[EnvCheck, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(check.ok for check in self.checks)

    @property
    def finished(self) -> bool:
        """Whether every check ran to its end (a check that timed out says nothing about the image)."""
        return all(check.finished for check in self.checks)

    def failures(self) -> list[str]:
        return [f"{c.benchmark}: {c.name}: {c.detail}" for c in self.checks if not c.ok]

    def to_json(self) -> dict[str, Any]:
        return {
            "image": self.image,
            "image_id": self.image_id,
            "benchmarks": list(self.benchmarks),
            "ok": self.ok,
            "finished": self.finished,
            "checks": [{"benchmark": c.benchmark, "name": c.name, "ok": c.ok, "detail": c.detail, "finished": c.finished} for c in self.checks],
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class _Held:
    """One Benchmark an image holds: its factory entry ("" when unknown) and its catalogue package, if any."""

    entry: str
    package: EnvironmentPackage | None


@dataclass(frozen=True, slots=True, kw_only=True)
class _Target:
    image: str
    image_id: str
    labels: dict[str, str]
    benchmarks: dict[str, _Held]


def check_environment(
    engine: DockerEngine,
    target: str,
    *,
    episodes: int = 3,
    scope: str = "",
    base: str = "auto",
    environments: list[Path] | None = None,
    baseline_dir: Path | None = None,
    progress: Progress = lambda message: None,
) -> EnvReport:
    """Check target (image reference, Benchmark name or package directory) and return the report.

    baseline_dir overrides the baseline Program (else: the package's, else the
    image's BASELINE directory, else the baseline check is reported as skipped).
    A Benchmark's faults are failed checks in the report. Raises EnvCheckError
    for a target that names nothing checkable, InfrastructureError when the
    engine, a build or the sandbox fails.
    """
    if _is_directory_target(target):
        environments = [Path(target).resolve(), *(environments or [])]
    builder = ImageBuilder(engine.client, base=base, environments=environments, progress=progress)
    reap_orphans(engine)  # what dead orchestrator processes left, once: every sandbox below starts on a clean engine
    resolved = _resolve(engine, builder, target, scope)
    checks: list[EnvCheck] = []
    for benchmark_id, held in resolved.benchmarks.items():
        entry = held.entry
        if not entry:
            checks.append(EnvCheck(benchmark=benchmark_id, name=CHECKS_RUN, ok=False,
                                   detail="the image's label names this Benchmark, but neither the catalogue nor an entry point "
                                          "in the image says which factory makes it (pass --environments with its package)"))
            continue
        progress(f"checking {benchmark_id} inside {resolved.image}")
        checks.extend(conformance_checks(_engine_runner(engine, scope), resolved.image, benchmark_id, entry))
        checks.append(_baseline(engine, builder, resolved, benchmark_id, held, episodes, scope, baseline_dir))
    return EnvReport(image=resolved.image, image_id=resolved.image_id, benchmarks=tuple(resolved.benchmarks), checks=tuple(checks))


def _is_directory_target(target: str) -> bool:
    """A directory holding a pyproject.toml (or written as a path) is a package source tree, not a name."""
    path = Path(target)
    return path.is_dir() and ((path / "pyproject.toml").is_file() or "/" in target or target.startswith("."))


def _resolve(engine: DockerEngine, builder: ImageBuilder, target: str, scope: str) -> _Target:
    if _is_directory_target(target):
        return _from_directory(engine, builder, Path(target))
    present = engine.image_labels(target)
    if present is not None:
        return _from_image(engine, builder, target, *present, scope=scope)
    try:
        package, benchmark_id, entry = resolve_benchmark(target, builder.packages())
    except CatalogueError as exc:
        raise EnvCheckError(f"{target!r} is no image in the engine, no package directory and no known Benchmark: {exc}") from exc
    image = _build(builder, package)
    image_id, labels = engine.image_labels(image) or ("", {})
    return _Target(image=image, image_id=image_id, labels=labels, benchmarks={benchmark_id: _Held(entry=entry, package=package)})


def _build(builder: ImageBuilder, package: EnvironmentPackage) -> str:
    """The tag of package's image, built if needed. Raises EnvCheckError for a malformed catalogue, InfrastructureError."""
    try:
        (result,) = builder.ensure([package.image])
    except (CatalogueError, ValueError) as exc:  # ValueError: conflicting pins in the package's lock
        raise EnvCheckError(f"{package.root}: {exc}") from exc
    return result.tag


def _from_directory(engine: DockerEngine, builder: ImageBuilder, directory: Path) -> _Target:
    try:
        if not is_package_dir(directory):
            raise EnvCheckError(f"{directory}: no pyproject.toml with a [tool.epg] table or a dependency on evopolicygym "
                                "(not an environment package)")
        package = load_package(directory.resolve())
    except CatalogueError as exc:
        raise EnvCheckError(str(exc)) from exc
    image = _build(builder, package)
    image_id, labels = engine.image_labels(image) or ("", {})
    if package.evopolicygym is not None:  # its Benchmarks: those discovered in its image, as the image's label names them
        package = with_discovered(package, label_benchmarks(labels.get(BENCHMARKS, "")))
    held = {benchmark_id: _Held(entry=entry, package=package) for benchmark_id, entry in package.table.benchmarks.items()}
    return _Target(image=image, image_id=image_id, labels=labels, benchmarks=held)


def _from_image(engine: DockerEngine, builder: ImageBuilder, image: str, image_id: str, labels: dict[str, str], *, scope: str) -> _Target:
    """Which Benchmarks image holds: those its label names (our builder's) and those installed in it as entry points.

    An author's image FROM one of ours inherits that image's label and adds its own
    distribution's entry points, so both are asked. The catalogue supplies the
    entries of Benchmarks copied into the image rather than installed, and baselines.
    """
    known: dict[str, _Held] = {}
    try:
        for package in builder.packages():
            for benchmark_id, entry in package.table.benchmarks.items():
                known.setdefault(benchmark_id, _Held(entry=entry, package=package))
    except CatalogueError:
        known = {}  # a malformed source tree does not stop an image check: the image itself is asked below
    entries = held_benchmarks(labels, installed_benchmarks(_engine_runner(engine, scope), image),
                              {benchmark_id: held.entry for benchmark_id, held in known.items()})
    benchmarks = {benchmark_id: _Held(entry=entry, package=known[benchmark_id].package if benchmark_id in known else None)
                  for benchmark_id, entry in entries.items()}
    if not benchmarks:
        raise EnvCheckError(f"image {image} holds no Benchmark: no {BENCHMARKS} label and no entry point in epg.benchmarks")
    return _Target(image=image, image_id=image_id, labels=labels, benchmarks=benchmarks)


def _labels(scope: str) -> dict[str, str]:
    return sandbox_labels(scope).for_role("env-check")


def _run_in_image(engine: DockerEngine, image: str, command: tuple[str, ...], scope: str) -> tuple[int | None, str, str]:
    """Run command inside image (hardened: no network, read-only, non-root); return (exit code, stdout, all output)."""
    container = engine.start(ContainerSpec(image=image, command=command, labels=_labels(scope), user="10001:10001",
                                           memory_bytes=2 * 1024**3, pids_limit=256, working_dir="/tmp"))  # as the runner
    try:
        status = engine.exit_of(container, CHECK_TIMEOUT_S)
        stdout = engine.logs(container, stdout=True, stderr=False).decode("utf-8", "replace")
        both = engine.logs(container, stdout=True, stderr=True).decode("utf-8", "replace")
        return status.exit_code, stdout, both
    finally:
        engine.remove(container)


def installed_benchmarks(run: RunInImage, image: str) -> dict[str, str]:
    """The entry-point Benchmarks installed in image (id -> entry), from `python3 -m epg_sdk.checks --list` run inside it.

    Raises EnvCheckError when the image cannot list them.
    """
    code, stdout, both = run(image, ("python3", "-m", "epg_sdk.checks", "--list"))
    try:
        return dict(json.loads(stdout.strip().splitlines()[-1])["benchmarks"])
    except (ValueError, IndexError, KeyError, TypeError) as exc:
        raise EnvCheckError(f"image {image} cannot list its Benchmarks (exit {code}): {both[-400:]}") from exc


def conformance_checks(run: RunInImage, image: str, benchmark_id: str, entry: str) -> list[EnvCheck]:
    """The conformance checks (`python3 -m epg_sdk.checks --entry ENTRY`) of one Benchmark, run inside image.

    A run that did not end in time, or printed no report, is one failed CHECKS_RUN check (not finished, for the former).
    """
    code, stdout, both = run(image, ("python3", "-m", "epg_sdk.checks", "--entry", entry))
    if code is None:
        return [EnvCheck(benchmark=benchmark_id, name=CHECKS_RUN, ok=False, detail=f"not finished within {CHECK_TIMEOUT_S:.0f} s",
                         finished=False)]
    try:
        report = json.loads(stdout.strip().splitlines()[-1])
        return [EnvCheck(benchmark=benchmark_id, name=c["name"], ok=bool(c["ok"]), detail=c["detail"]) for c in report["checks"]]
    except (ValueError, IndexError, KeyError, TypeError):
        return [EnvCheck(benchmark=benchmark_id, name=CHECKS_RUN, ok=False, detail=f"exit {code}: {both[-400:].strip()}")]


RunInImage = Callable[[str, tuple[str, ...]], tuple[int | None, str, str]]
"""Runs a command to its end in a hardened container of an image: (exit code, None when it did not end in time; stdout; all output)."""


def held_benchmarks(labels: dict[str, str], installed: dict[str, str], known: dict[str, str]) -> dict[str, str]:
    """Benchmark id -> factory entry ("" when none is known) of every Benchmark an image holds.

    Those its benchmarks label (`labels.BENCHMARKS`) names (an image built FROM one of ours inherits it), then those installed
    in it (`installed_benchmarks`). What the image registers itself wins, then the entry the label gives (an EvoPolicyGym
    package's image labels the JSON list of the Benchmarks discovered in it); known (a catalogue or the
    package under test) fills in the entries of packages copied into the image rather than installed.
    """
    named = label_benchmarks(labels.get(BENCHMARKS, ""))  # ids, with their entries for an EvoPolicyGym package's image
    return {benchmark_id: installed.get(benchmark_id) or named.get(benchmark_id) or known.get(benchmark_id, "")
            for benchmark_id in dict.fromkeys([*named, *installed])}


def _engine_runner(engine: DockerEngine, scope: str) -> RunInImage:
    return lambda image, command: _run_in_image(engine, image, command, scope)


def _baseline(engine: DockerEngine, builder: ImageBuilder, target: _Target, benchmark_id: str, held: _Held, episodes: int, scope: str,
              baseline_dir: Path | None) -> EnvCheck:
    """The baseline Program through the real sandbox on target's image: every Episode must complete."""
    name = f"{BASELINE_CHECK} ({episodes} Episodes)"
    try:
        baseline = _baseline_program(engine, target, held, benchmark_id, baseline_dir, scope)
    except (ProgramError, InfrastructureError) as exc:  # not a Program, or the labelled directory is not in the image
        return EnvCheck(benchmark=benchmark_id, name=name, ok=False, detail=f"baseline Program: {exc.message}")
    if baseline is None:
        return EnvCheck(benchmark=benchmark_id, name=name, ok=True,
                        detail=f"skipped: no baseline Program known (no catalogue package, no {BASELINE} label)")
    setup = SandboxSetup(labels=sandbox_labels(scope), tuning=SandboxTuning(episodes=episodes))
    try:
        images = benchmark_images(builder, benchmark_id, environment_image=target.image, benchmark_entry=held.entry)
        with open_sandbox(engine, images, setup) as sandbox:
            evaluation = evaluate_program(sandbox, baseline, split="train", seed=0, episodes=episodes)
    except InfrastructureError as exc:
        last = (exc.evidence.strip().splitlines() or [""])[-1]
        return EnvCheck(benchmark=benchmark_id, name=name, ok=False, detail=f"{exc.code.value}: {exc.message}: {last}")
    failures = [(e, e.failure) for e in evaluation.feedback.episodes if e.failure is not None]
    detail = "; ".join(f"Episode {e.index}: {failure.value}: {e.reason}" for e, failure in failures)
    return EnvCheck(benchmark=benchmark_id, name=name, ok=not failures, detail=detail or f"score {evaluation.feedback.score:.3f}")


def _baseline_program(engine: DockerEngine, target: _Target, held: _Held, benchmark_id: str, baseline_dir: Path | None,
                      scope: str) -> Program | None:
    """The given baseline, else the catalogue package's for benchmark_id, else the one in the image's BASELINE directory;
    None when none is known."""
    if baseline_dir is not None:
        return capture_program(baseline_dir)
    if held.package is not None and held.package.baseline_for(benchmark_id).is_dir():
        return capture_program(held.package.baseline_for(benchmark_id))
    path = target.labels.get(BASELINE, "")
    if not path:
        return None
    archive = engine.copy_from_image(target.image, path.rstrip("/"), _labels(scope))
    with tempfile.TemporaryDirectory(prefix="epg-baseline-") as directory:
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(directory, filter="data")
        root = Path(directory)
        entries = [p for p in root.iterdir()]
        program_root = entries[0] if len(entries) == 1 and entries[0].is_dir() and not (root / "policy.py").exists() else root
        return capture_program(program_root)
