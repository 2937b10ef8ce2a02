"""Images on trixie's Python 3.13: the base, the py313 SDK layer and policy runtime, one of our packages built on them,
and an EvoPolicyGym package (Python 3.12+ syntax) whose Benchmarks are discovered inside its image into its label.

The images are built once per test run (this module's fixture), on a base bootstrapped from Debian trixie where no
registry answers. The EvoPolicyGym package is the stdlib counter of tests/data/evopolicygym, copied beside a Python 3.13
copy of our CartPole: its image is the one tests/docker/test_evopolicygym_sandbox.py builds (the same inputs, one tag).
"""
from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from programs import STEADY
from support.cli import invoke_cli

from epg_sdk.codes import EpisodeStatus
from orchestrator.backends.container_spec import ContainerSpec
from orchestrator.backends.engine import DockerEngine
from orchestrator.backends.labels import BENCHMARKS, sandbox_labels
from orchestrator.backends.sandbox import DockerSandbox
from orchestrator.backends.settings import SandboxImages, SandboxLimits, SandboxTuning
from orchestrator.images.builder import ImageBuilder
from orchestrator.images.catalogue import DEFAULT_ENVIRONMENTS, label_benchmarks, resolve_benchmark
from orchestrator.images.recipes import policy_image_of
from orchestrator.kernel.evaluation import evaluate_program
from orchestrator.kernel.program import capture_program

REPO = Path(__file__).resolve().parents[2]
PACKAGES = REPO / "tests" / "data" / "evopolicygym"
COUNTER_ID = "epg-test/stdlib-counter-v1"
COUNTER_ENTRY = "stdlib_counter:CounterBenchmark"
COUNTER_IMAGE = "env-epg-epg-test-benchmark-stdlib-counter"


def _stdlib_counter(root: Path) -> Path:
    """The stdlib counter EvoPolicyGym package written here (no [tool.epg], `type` statements), copied beside the others."""
    shutil.copytree(PACKAGES / "stdlib_counter", root, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
    return root


def _cartpole_on_313(root: Path) -> Path:
    """Our CartPole package, copied, asking for Python 3.13 (another image name, so its Python 3.11 image is untouched)."""
    shutil.copytree(DEFAULT_ENVIRONMENTS / "cartpole", root, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
    pyproject = root / "pyproject.toml"
    text = pyproject.read_text().replace('image = "env-cartpole"', 'image = "env-cartpole-py313"\npython = "3.13"')
    assert 'python = "3.13"' in text
    pyproject.write_text(text)
    return root


@pytest.fixture(scope="module")
def py313(engine: DockerEngine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ImageBuilder, dict[str, str], Path]]:
    """Build (or find) the Python 3.13 images once: (their builder, name -> tag, the root of their packages). Prints each
    image's build time."""
    root = tmp_path_factory.mktemp("py313")
    packages = root / "packages"
    _cartpole_on_313(packages / "cartpole")
    _stdlib_counter(packages / "stdlib_counter")
    builder = ImageBuilder(engine.client, environments=[packages], progress=print)
    started = time.monotonic()
    results = builder.ensure(["policy-runtime-py313", "env-sdk-py313", "env-cartpole-py313", COUNTER_IMAGE])
    for result in results:
        print(f"{result.name}: {'built' if result.built else 'up to date'} in {result.seconds:.1f} s")
    print(f"the Python 3.13 images: {time.monotonic() - started:.1f} s")
    yield builder, {result.name: result.tag for result in results}, packages


def _python_in(engine: DockerEngine, image: str, scope: str, code: str) -> str:
    labels = sandbox_labels(scope).for_role("py313-check")
    container = engine.start(ContainerSpec(image=image, command=("python3", "-c", code), labels=labels))
    try:
        status = engine.exit_of(container, 60)
        output = engine.logs(container, stdout=True, stderr=True).decode()
        assert status.exit_code == 0, output
        return output.strip()
    finally:
        engine.remove(container)


def test_the_py313_images_run_trixies_python_313(engine, scope, py313):
    _builder, tags, _packages = py313
    for name in ("policy-runtime-py313", "env-sdk-py313", "env-cartpole-py313", COUNTER_IMAGE):
        assert _python_in(engine, tags[name], scope, "import sys; print(sys.version_info[:2])") == "(3, 13)", name
    assert _python_in(engine, tags["policy-runtime-py313"], scope, "import evopolicygym.policy; print('ok')") == "ok"
    assert "grpc" in _python_in(engine, tags["env-sdk-py313"], scope, "import grpc, evopolicygym.authoring; print(grpc.__name__)")
    # the package's `type Position = int` statement runs: a SyntaxError on the Python 3.11 images
    assert _python_in(engine, tags[COUNTER_IMAGE], scope, "import stdlib_counter.environment as e; print(e.Position.__value__.__name__)") == "int"


def test_our_cartpole_built_on_python_313_balances_the_pole_through_the_sandbox(engine, scope, py313, write_program):
    builder, tags, _packages = py313
    package, benchmark_id, entry = resolve_benchmark("CartPole-v1", builder.packages())
    assert (package.image, package.python, policy_image_of(package)) == ("env-cartpole-py313", "3.13", "policy-runtime-py313")
    images = SandboxImages(environment=tags["env-cartpole-py313"], policy_runtime=tags["policy-runtime-py313"], benchmark_entry=entry)
    with DockerSandbox(engine, images, SandboxLimits(), sandbox_labels(scope), tuning=SandboxTuning(pool_size=1)) as sandbox:
        evaluation = evaluate_program(sandbox, capture_program(write_program(STEADY)), split="train", seed=3, episodes=2)
    assert benchmark_id == "CartPole-v1"
    assert [(o.status, o.steps) for o in evaluation.feedback.episodes] == [(EpisodeStatus.COMPLETED, 500)] * 2


def test_an_evopolicygym_package_image_labels_the_benchmarks_discovered_inside_it(engine, py313):
    builder, tags, packages = py313
    _image_id, labels = engine.image_labels(tags[COUNTER_IMAGE]) or ("", {})
    assert label_benchmarks(labels.get(BENCHMARKS, "")) == {COUNTER_ID: COUNTER_ENTRY}
    assert json.loads(labels[BENCHMARKS])[0]["class"] == "CounterBenchmark"
    assert not engine.image_exists(tags[COUNTER_IMAGE] + "-undiscovered")
    package, benchmark_id, entry = resolve_benchmark("EPG-TEST/STDLIB-COUNTER", builder.packages())
    assert (benchmark_id, entry, package.python, policy_image_of(package)) == (COUNTER_ID, COUNTER_ENTRY, "3.13", "policy-runtime-py313")
    assert (package.root / package.table.baseline / "policy.py").is_file()
    listed = invoke_cli("benchmarks", "--json", "--environments", str(packages))
    assert listed.exit_code == 0, listed.stderr
    rows = {row["id"]: row for row in listed.json()["benchmarks"]}
    assert (rows[COUNTER_ID]["entry"], rows[COUNTER_ID]["image"], rows[COUNTER_ID]["python"]) == (COUNTER_ENTRY, COUNTER_IMAGE, "3.13")
    assert listed.json()["not_built"] == []
