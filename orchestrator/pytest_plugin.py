"""A pytest plugin for environment authors: test an environment image with `pytest`.

Installed with the orchestrator (`pip install 'epg-orchestrator[pytest]'`), it is
loaded by every `pytest` through the `pytest11` entry point `epg`. Options
(each also an ini key of the same name with underscores, e.g. `epg_image`):

- `--epg-image IMAGE`: the environment image under test. Default: the image of
  the package in `--epg-package`, built (or found up to date) by the image builder.
- `--epg-package DIR`: the environment package (its `pyproject.toml` with
  `[tool.epg]`, its baseline Program). Default: the nearest directory at or above
  the test module holding such a `pyproject.toml` (up to pytest's rootdir), else
  the rootdir. A conftest may override the `epg_package_dir` fixture instead.
- `--epg-episodes N`: Episodes of the baseline run (default 3).
- `--epg-base auto|debootstrap|IMAGE`: the base image of builds (default auto).

Fixtures: `epg_image`, `epg_environment` (`env test`'s conformance checks, from
`orchestrator.envcheck`, run inside the image in hardened containers started with
testcontainers), `epg_check_report`
(the same report, asserted to pass), `epg_baseline` (the package's baseline
Program through the real sandbox: its Feedback), `epg_baselines` (the same for
each Benchmark of an image holding several: id -> Feedback), `epg_completed_baseline`
and `epg_completed_baselines` (the same, asserted to have completed every Episode),
`epg_env_test` (runs `epg-orchestrate env test IMAGE --baseline DIR --json` and checks
that it left no container). `assert_checks_pass` and `assert_episodes_completed` are
the assertions on their own. Example, the whole of an author's image test:

    def test_conformance(epg_check_report):
        assert epg_check_report.benchmarks

    def test_baseline_completes(epg_completed_baseline):
        assert epg_completed_baseline.score > 0

A missing Docker engine, a missing image or a package that cannot be read fails
the fixture with one clear message; nothing here ever skips. Where this plugin is
not installed (a venv with the SDK and the package only) its fixtures do not exist:
a package's `tests/image/conftest.py` then skips its image tests, saying what they
need (`environments/*/tests/image/conftest.py` do, and skip nothing when it is loaded). Every container
started carries the orchestrator's labels (`epg-orchestrate gc` reaps them) and
is removed when the session ends. Results are computed once per image per
session, so one session can test several packages (each test module finds the
package it sits in, or a conftest per package overrides `epg_package_dir`), and
the fixtures are module-scoped for that reason. testcontainers' configuration is left
as the session has it: the plugin sets none of it and starts no Ryuk reaper.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # the engine, docker-py, testcontainers and NumPy load only when a fixture runs
    from epg_sdk.checks import CheckReport
    from orchestrator.backends.engine import DockerEngine
    from orchestrator.backends.labels import LabelSet
    from orchestrator.envcheck import RunInImage
    from orchestrator.images.catalogue import EnvironmentPackage
    from orchestrator.kernel.ports import EvaluationFeedback

ENV_TEST_TIMEOUT_S = 1200.0
_OPTIONS = {
    "epg_image": "the environment image under test (default: built from the package)",
    "epg_package": "the environment package directory (default: the package holding the test module, else the rootdir)",
    "epg_episodes": "Episodes of the baseline run (default 3)",
    "epg_base": "base image of builds: auto, debootstrap or an image (default auto)",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ImageReport:
    """The conformance checks of every Benchmark an environment image holds."""

    image: str
    reports: tuple[CheckReport, ...]

    @property
    def benchmarks(self) -> tuple[str, ...]:
        return tuple(report.benchmark_id for report in self.reports)

    @property
    def ok(self) -> bool:
        return bool(self.reports) and all(report.ok for report in self.reports)

    def failures(self) -> list[str]:
        """One line per failed check: `Benchmark: check: detail`."""
        return [f"{report.benchmark_id}: {line}" for report in self.reports for line in report.failures()]


def assert_checks_pass(report: ImageReport) -> None:
    """Fail the calling test, naming every failed check, unless every check of every Benchmark passed."""
    if not report.reports:
        pytest.fail(f"{report.image}: no Benchmark was checked", pytrace=False)
    if not report.ok:
        lines = "\n".join(f"  {line}" for line in report.failures())
        pytest.fail(f"{report.image}: {len(report.failures())} conformance check(s) failed:\n{lines}", pytrace=False)


def assert_episodes_completed(feedback: EvaluationFeedback, name: str = "the baseline") -> None:
    """Fail the calling test unless the Feedback holds Episodes 0..n-1 (n >= 1), each completed without a failure after at least one step.

    name (for example a Benchmark id) begins the failure message.
    """
    episodes = feedback.episodes
    if not episodes:
        pytest.fail(f"{name}: the Feedback holds no Episode", pytrace=False)
    problems = []
    indices = [episode.index for episode in episodes]
    if indices != list(range(len(episodes))):
        problems.append(f"Episode indices are {indices}, not 0..{len(episodes) - 1}")
    problems += [f"Episode {e.index}: {e.status.value}, failure {e.failure}" for e in episodes if (e.status.value, e.failure) != ("completed", None)]
    problems += [f"Episode {e.index}: {e.steps} steps" for e in episodes if e.steps <= 0]
    if problems:
        lines = "\n".join(f"  {line}" for line in problems)
        pytest.fail(f"{name}: {len(problems)} problem(s) in {len(episodes)} Episode(s):\n{lines}", pytrace=False)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("epg", "EvoPolicyGym environment images")
    for name, help_text in _OPTIONS.items():
        flag = "--" + name.replace("_", "-")
        group.addoption(flag, dest=name, default=None, help=help_text)
        parser.addini(name, help_text, default=None)


DOCKER_MARKER = "docker: needs the real Docker engine (never skipped: a missing engine fails the run)"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", DOCKER_MARKER)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that uses the plugin's engine with `docker`, so `-m "not docker"` selects the tests that need none."""
    for item in items:
        if "_epg_session" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.docker)


def _option(config: pytest.Config, name: str) -> str | None:
    value = config.getoption(name)
    chosen = value if value is not None else config.getini(name)
    return str(chosen) if chosen is not None else None


@dataclass(slots=True)
class _Session:
    """What the plugin's fixtures share in one test session: the engine, labels and results per image."""

    engine: DockerEngine
    labels: LabelSet
    base: str
    images: dict[Path, str] = field(default_factory=dict)
    reports: dict[str, ImageReport] = field(default_factory=dict)
    baselines: dict[tuple[str, Path, str], EvaluationFeedback] = field(default_factory=dict)
    benchmarks: dict[str, dict[str, str]] = field(default_factory=dict)
    policy_runtimes: dict[str, str] = field(default_factory=dict)  # image name (of the package's Python) -> tag


@pytest.fixture(scope="session")
def _epg_session(request: pytest.FixtureRequest) -> Iterator[_Session]:
    from orchestrator.backends.engine import DockerEngine
    from orchestrator.backends.labels import LabelSet, owner_id, selector
    from orchestrator.kernel.infrastructure import InfrastructureError

    try:
        engine = DockerEngine.connect()
    except InfrastructureError as exc:
        pytest.fail(f"testing an environment image needs a Docker engine: {exc.message} ({exc.evidence})", pytrace=False)
    labels = LabelSet(sandbox=secrets.token_hex(6), owner=owner_id())
    state = _Session(engine=engine, labels=labels, base=_option(request.config, "epg_base") or "auto")
    yield state
    engine.reap(selector(sandbox=labels.sandbox))


@pytest.fixture(scope="module")
def epg_package_dir(request: pytest.FixtureRequest) -> Path:
    """The environment package directory. Override it in a conftest.

    `--epg-package`, else the nearest directory at or above the test module whose
    pyproject.toml has a [tool.epg] table (looking no higher than pytest's rootdir),
    else the rootdir. Fails the test when a pyproject.toml on the way cannot be read.
    """
    value = _option(request.config, "epg_package")
    if value:
        return Path(value).resolve()
    return _enclosing_package(Path(request.path), request.config.rootpath) or request.config.rootpath


def _enclosing_package(path: Path, rootdir: Path) -> Path | None:
    """The nearest directory at or above path, and at or below rootdir, that is an environment package; None when there is none."""
    from orchestrator.images.catalogue import CatalogueError, is_package_dir

    for directory in path.resolve().parents:
        if not directory.is_relative_to(rootdir.resolve()):
            return None
        try:
            if is_package_dir(directory):
                return directory
        except CatalogueError as exc:
            pytest.fail(f"looking for the environment package of {path}: {exc}", pytrace=False)
    return None


@pytest.fixture(scope="module")
def epg_package(epg_package_dir: Path) -> EnvironmentPackage:
    """The package read from epg_package_dir. Fails the test when its pyproject.toml is missing or malformed."""
    from orchestrator.images.catalogue import CatalogueError, load_package

    try:
        return load_package(epg_package_dir)
    except CatalogueError as exc:
        pytest.fail(f"environment package {epg_package_dir}: {exc}", pytrace=False)


@pytest.fixture(scope="module")
def epg_image(request: pytest.FixtureRequest, _epg_session: _Session, epg_package: EnvironmentPackage) -> str:
    """The image reference under test: `--epg-image`, else the package's image built by the image builder.

    Fails the test when the given image is not in the engine or the build fails.
    """
    given = _option(request.config, "epg_image")
    if given:
        if not _epg_session.engine.image_exists(given):
            pytest.fail(f"image {given} is not in the Docker engine; build it first "
                        f"(`epg-orchestrate images build {epg_package.image}` or `docker build`)", pytrace=False)
        return given
    if epg_package.root not in _epg_session.images:
        (tag,) = _ensure(_epg_session, [epg_package.image], [epg_package.root])
        _epg_session.images[epg_package.root] = tag
    return _epg_session.images[epg_package.root]


@pytest.fixture(scope="module")
def epg_environment(_epg_session: _Session, epg_image: str, epg_package: EnvironmentPackage) -> ImageReport:
    """The conformance checks (`python3 -m epg_sdk.checks`) of every Benchmark the image holds, run inside it.

    The checks, and which Benchmarks the image holds, are `env test`'s own
    (`orchestrator.envcheck`): the Benchmarks its `org.evopolicygym.benchmarks`
    label names and those installed in it (an image naming none: every Benchmark
    the package registers); the image's entry points, else the package's, say
    where each is made. Each command runs in its own container started with
    testcontainers, hardened like the sandbox's (no network, read-only root,
    non-root user, no capabilities, limits). Returns the report, failed checks
    included; fails the test when a check run could not finish or printed no report.
    """
    if epg_image not in _epg_session.reports:
        reports = tuple(_check_in_image(_epg_session, epg_image, benchmark_id, entry)
                        for benchmark_id, entry in _benchmarks_of(_epg_session, epg_image, epg_package).items())
        _epg_session.reports[epg_image] = ImageReport(image=epg_image, reports=reports)
    return _epg_session.reports[epg_image]


@pytest.fixture(scope="module")
def epg_check_report(epg_environment: ImageReport) -> ImageReport:
    """epg_environment, after failing the test with every failed check named unless all passed."""
    assert_checks_pass(epg_environment)
    return epg_environment


@pytest.fixture(scope="module")
def epg_baseline(request: pytest.FixtureRequest, _epg_session: _Session, epg_image: str,
                 epg_package: EnvironmentPackage) -> EvaluationFeedback:
    """The Feedback of the package's baseline Program on `--epg-episodes` train Episodes (seed 0) of the image.

    The Program runs through the real sandbox: the image as the environment
    runner, each Episode in a fresh policy container. Policy failures are in the
    Feedback (`episodes[i].failure`); fails the test for an image holding several
    Benchmarks (use epg_baselines there), an unreadable baseline or an infrastructure fault.
    """
    benchmarks = _benchmarks_of(_epg_session, epg_image, epg_package)
    if len(benchmarks) != 1:
        pytest.fail(f"{epg_image} holds {len(benchmarks)} Benchmarks ({', '.join(benchmarks)}); "
                    "epg_baseline runs the baseline of a package with exactly one (epg_baselines runs it on each)", pytrace=False)
    ((benchmark_id, entry),) = benchmarks.items()
    return _baseline_feedback(request, _epg_session, epg_image, epg_package, benchmark_id, entry)


@pytest.fixture(scope="module")
def epg_baselines(request: pytest.FixtureRequest, _epg_session: _Session, epg_image: str,
                  epg_package: EnvironmentPackage) -> dict[str, EvaluationFeedback]:
    """Benchmark id -> the Feedback of the package's baseline Program on that Benchmark, for every Benchmark of the image.

    As epg_baseline, one Benchmark after another (a family package's one baseline serves them all).
    """
    return {benchmark_id: _baseline_feedback(request, _epg_session, epg_image, epg_package, benchmark_id, entry)
            for benchmark_id, entry in _benchmarks_of(_epg_session, epg_image, epg_package).items()}


@pytest.fixture(scope="module")
def epg_completed_baseline(epg_baseline: EvaluationFeedback) -> EvaluationFeedback:
    """epg_baseline, after failing the test unless it completed every Episode (assert_episodes_completed)."""
    assert_episodes_completed(epg_baseline)
    return epg_baseline


@pytest.fixture(scope="module")
def epg_completed_baselines(epg_baselines: dict[str, EvaluationFeedback]) -> dict[str, EvaluationFeedback]:
    """epg_baselines, after failing the test, naming the Benchmark, unless each completed every Episode."""
    for benchmark_id, feedback in epg_baselines.items():
        assert_episodes_completed(feedback, benchmark_id)
    return epg_baselines


@pytest.fixture(scope="module")
def epg_env_test(_epg_session: _Session, epg_image: str, epg_package: EnvironmentPackage) -> Callable[..., dict[str, Any]]:
    """run(program_dir, episodes=3) -> the JSON report of `epg-orchestrate env test IMAGE --baseline program_dir -n episodes`.

    The command checks every Benchmark of the image under test and runs the
    Program on each through the real sandbox, finding packages next to this one
    (`--environments` its parent). Its containers carry a scope label of this
    fixture's own. run fails the test when the command crashes (an exit status
    other than 0 or 1, or one that disagrees with the report's `ok`) or leaves
    any container of that scope behind; a failed check is in the report.
    """
    from orchestrator.backends.labels import SCOPE

    scope = f"epg-env-test-{secrets.token_hex(4)}"

    def run(program_dir: Path, episodes: int = 3) -> dict[str, Any]:
        command = [sys.executable, "-m", "orchestrator.cli.app", "env", "test", epg_image, "--baseline", str(program_dir),
                   "-n", str(episodes), "--json", "--environments", str(epg_package.root.parent)]
        result = subprocess.run(command, capture_output=True, text=True, timeout=ENV_TEST_TIMEOUT_S, env={**os.environ, "EPG_SCOPE": scope})
        leftovers = [c.short_id for c in _epg_session.engine.client.containers.list(all=True, filters={"label": f"{SCOPE}={scope}"})]
        if leftovers:
            pytest.fail(f"env test left containers {leftovers}", pytrace=False)
        if result.returncode not in (0, 1):
            pytest.fail(f"env test exited {result.returncode}:\n{result.stderr[-3000:]}", pytrace=False)
        report: dict[str, Any] = json.loads(result.stdout)
        if result.returncode != (0 if report["ok"] else 1):
            pytest.fail(f"env test exited {result.returncode} with a report whose ok is {report['ok']}", pytrace=False)
        return report

    return run


def _baseline_feedback(request: pytest.FixtureRequest, state: _Session, image: str, package: EnvironmentPackage,
                       benchmark_id: str, entry: str) -> EvaluationFeedback:
    from orchestrator.backends.settings import SandboxImages, SandboxTuning
    from orchestrator.kernel.evaluation import evaluate_program
    from orchestrator.kernel.infrastructure import InfrastructureError
    from orchestrator.kernel.program import ProgramError, capture_program
    from orchestrator.sandbox_opening import SandboxSetup, open_sandbox

    key = (image, package.root, benchmark_id)
    if key not in state.baselines:
        try:
            baseline = capture_program(package.baseline_for(benchmark_id))
        except ProgramError as exc:
            pytest.fail(f"baseline Program {package.baseline_for(benchmark_id)}: {exc.message}", pytrace=False)
        episodes = int(_option(request.config, "epg_episodes") or 3)
        from orchestrator.images.recipes import policy_image_of

        policy_image = policy_image_of(package)  # policy-runtime, or policy-runtime-py313 for a Python 3.13 package
        if policy_image not in state.policy_runtimes:
            (state.policy_runtimes[policy_image],) = _ensure(state, [policy_image], [package.root])
        images = SandboxImages(environment=image, policy_runtime=state.policy_runtimes[policy_image], benchmark_entry=entry)
        try:
            setup = SandboxSetup(labels=state.labels, tuning=SandboxTuning(episodes=episodes))
            with open_sandbox(state.engine, images, setup) as sandbox:
                evaluation = evaluate_program(sandbox, baseline, split="train", seed=0, episodes=episodes)
        except InfrastructureError as exc:
            pytest.fail(f"the baseline of {benchmark_id} in {image} did not run: {exc.code.value}: {exc.message}\n{exc.evidence[-2000:]}",
                        pytrace=False)
        state.baselines[key] = evaluation.feedback
    return state.baselines[key]


def _ensure(state: _Session, names: list[str], roots: list[Path]) -> list[str]:
    """Build (or find up to date) the named images; return their tags. Fails the test on a build fault."""
    from orchestrator.images.builder import ImageBuilder
    from orchestrator.images.catalogue import CatalogueError
    from orchestrator.kernel.infrastructure import InfrastructureError

    try:
        builder = ImageBuilder(state.engine.client, base=state.base, environments=roots)
        return [result.tag for result in builder.ensure(names)]
    except (InfrastructureError, CatalogueError, ValueError) as exc:
        detail = f"{exc.message}\n{exc.evidence[-2000:]}" if isinstance(exc, InfrastructureError) else str(exc)
        pytest.fail(f"could not build {', '.join(names)}: {detail}", pytrace=False)


def _benchmarks_of(state: _Session, image: str, package: EnvironmentPackage) -> dict[str, str]:
    """Benchmark id -> factory entry for every Benchmark image holds, as `env test` finds them (`envcheck.held_benchmarks`).

    Those the image's benchmarks label (`labels.BENCHMARKS`) names and those `python3 -m epg_sdk.checks --list`
    finds installed in it, else (an image that names none) all the package registers.
    Where each is made: the image's installed entry points, else the package's. Fails
    the test for a Benchmark that neither says how to make.
    """
    from orchestrator.envcheck import EnvCheckError, held_benchmarks, installed_benchmarks

    if image not in state.benchmarks:
        _image_id, labels = state.engine.image_labels(image) or ("", {})
        try:
            installed = installed_benchmarks(_runner(state, "env-list"), image)
        except EnvCheckError:
            installed = {}  # an SDK without --list: the label, else the package, says which
        held = held_benchmarks(labels, installed, dict(package.table.benchmarks)) or dict(package.table.benchmarks)
        unknown = [benchmark_id for benchmark_id, entry in held.items() if not entry]
        if unknown:
            pytest.fail(f"{image} holds {', '.join(unknown)}, which neither the image's entry points "
                        f"nor {package.root / 'pyproject.toml'} register", pytrace=False)
        state.benchmarks[image] = held
    return state.benchmarks[image]


def _check_in_image(state: _Session, image: str, benchmark_id: str, entry: str) -> CheckReport:
    """The conformance checks of one Benchmark run inside image (`envcheck.conformance_checks`), as the SDK's CheckReport.

    Fails the test when they did not run to their end or printed no report.
    """
    from epg_sdk.checks import Check, CheckReport
    from orchestrator.envcheck import CHECKS_RUN, conformance_checks

    checks = conformance_checks(_runner(state, "env-check"), image, benchmark_id, entry)
    for check in checks:
        if check.name == CHECKS_RUN and not check.ok:
            pytest.fail(f"the checks of {benchmark_id} did not run inside {image}: {check.detail}", pytrace=False)
    return CheckReport(benchmark_id=benchmark_id, checks=tuple(Check(name=c.name, ok=c.ok, detail=c.detail) for c in checks))


def _runner(state: _Session, role: str) -> RunInImage:
    return lambda image, command: _run_in_image(state, image, command, role)


def _run_in_image(state: _Session, image: str, command: tuple[str, ...], role: str) -> tuple[int | None, str, str]:
    """Run command to its end in a hardened container of image started with testcontainers; return (exit status, stdout, all output).

    The container is the sandbox's kind (no network, read-only root, non-root, no
    capabilities, limits, our labels; `to_docker_kwargs` of a ContainerSpec) and is
    removed before this returns. testcontainers' own Docker client starts it, which
    labels it as testcontainers does and leaves testcontainers' configuration as the
    session has it: `DockerContainer.start()` would start the Ryuk reaper (an image
    pulled from a registry) unless that process-wide configuration turned it off for
    every testcontainers user of the session. Our labels let the session's own
    clean-up and `epg-orchestrate gc` find the container should this process die.
    Fails the test when the command does not end within envcheck's CHECK_TIMEOUT_S.
    """
    from testcontainers.core.docker_client import DockerClient

    from orchestrator.backends.container_spec import ContainerSpec, to_docker_kwargs
    from orchestrator.envcheck import CHECK_TIMEOUT_S

    spec = ContainerSpec(image=image, command=command, labels=state.labels.for_role(role), memory_bytes=2 * 1024**3, pids_limit=256)
    kwargs = to_docker_kwargs(spec)
    # Said as `network`: without one, testcontainers joins a network it guesses when it runs inside a container itself.
    kwargs["network"] = kwargs.pop("network_mode")
    client = DockerClient()
    try:
        container = client.run(**kwargs)
        try:
            mode = container.attrs["HostConfig"]["NetworkMode"]
            if mode != "none":
                pytest.fail(f"the container of {image} got network mode {mode!r} instead of none", pytrace=False)
            try:
                status = container.wait(timeout=CHECK_TIMEOUT_S)
            except Exception as exc:  # docker-py raises its transport's timeout
                pytest.fail(f"{' '.join(command)} did not finish inside {image} within {CHECK_TIMEOUT_S:.0f} s: {exc}", pytrace=False)
            stdout = container.logs(stdout=True, stderr=False).decode("utf-8", "replace")
            both = container.logs(stdout=True, stderr=True).decode("utf-8", "replace")
        finally:
            container.remove(force=True, v=True)
    finally:
        client.client.close()
    return status.get("StatusCode"), stdout, both
