"""Images on trixie's Python 3.13: the base, the py313 SDK layer and policy runtime, one of our packages built on them,
and an EvoPolicyGym package (Python 3.12+ syntax) whose Benchmarks are discovered inside its image into its label.

The images are built once per test run (this module's fixture), on a base bootstrapped from Debian trixie where no
registry answers. Until compat/ (the evopolicygym package) and `epg_sdk.evopolicygym` (the discovery command) are in
the checkout, stand-ins written here take their place: a compat package that makes `evopolicygym.authoring` and
`evopolicygym.policy` importable, and a discovery command that imports the package's module (proving its 3.12 syntax
runs) and prints its Benchmark as `python -m epg_sdk.evopolicygym discover` does.
"""

from __future__ import annotations

import json
import shutil
import textwrap
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
from orchestrator.images import recipes
from orchestrator.images.builder import ImageBuilder
from orchestrator.images.catalogue import DEFAULT_ENVIRONMENTS, label_benchmarks, resolve_benchmark
from orchestrator.images.recipes import policy_image_of
from orchestrator.kernel.evaluation import evaluate_program
from orchestrator.kernel.program import capture_program

REPO = Path(__file__).resolve().parents[2]
TINY_ID = "TinyCounter-v0"
TINY_ENTRY = "tiny_counter:TinyCounterBenchmark"

TINY_MODULE = '''\
"""A stdlib-only EvoPolicyGym-shaped package: count to a target (Python 3.12+ syntax below)."""

from evopolicygym import authoring

type Count = int  # a type statement: a SyntaxError before Python 3.12


class TinyCounterBenchmark:
    """Reward 1 for each step whose action is the next number, up to the target."""

    target: Count = 5

    def episodes(self, split, *, seed, count):
        return [authoring.EpisodeSpec(environment_seed=seed + index, scenario=None) for index in range(count)]


def baseline_program():
    from pathlib import Path

    return Path(__file__).parent / "programs" / "baseline"
'''

TINY_POLICY = '''\
from evopolicygym.policy import PolicyContext, PolicyValue


class Policy:
    def act(self, observation: PolicyValue) -> PolicyValue:
        return observation + 1


def make_policy(context: PolicyContext) -> Policy:
    return Policy()
'''

# Until compat/ lands: just what the images import (SMOKE) and the tiny package uses.
STAND_IN_AUTHORING = '''\
from dataclasses import dataclass


@dataclass(frozen=True)
class EpisodeSpec:
    environment_seed: int
    scenario: object = None
'''
STAND_IN_POLICY = '''\
PolicyValue = object


class PolicyContext:
    pass
'''


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


def _tiny_package(root: Path) -> Path:
    """An EvoPolicyGym package as their repository lays one out: no [tool.epg], a dependency on evopolicygym."""
    _write(root / "pyproject.toml", '''\
        [project]
        name = "evopolicygym-benchmark-tiny-counter"
        version = "0.1.0"
        requires-python = ">=3.12,<3.13"
        dependencies = ["evopolicygym==0.3.*"]

        [build-system]
        requires = ["hatchling==1.31.0"]
        build-backend = "hatchling.build"

        [tool.hatch.build.targets.wheel]
        packages = ["src/tiny_counter"]
        ''')
    _write(root / "src" / "tiny_counter" / "__init__.py", TINY_MODULE)
    _write(root / "src" / "tiny_counter" / "programs" / "baseline" / "policy.py", TINY_POLICY)
    return root


def _cartpole_on_313(root: Path) -> Path:
    """Our CartPole package, copied, asking for Python 3.13 (another image name, so its Python 3.11 image is untouched)."""
    shutil.copytree(DEFAULT_ENVIRONMENTS / "cartpole", root, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
    pyproject = root / "pyproject.toml"
    text = pyproject.read_text().replace('image = "env-cartpole"', 'image = "env-cartpole-py313"\npython = "3.13"')
    assert 'python = "3.13"' in text
    pyproject.write_text(text)
    return root


def _stand_in_compat(root: Path) -> Path:
    _write(root / "pyproject.toml", '''\
        [project]
        name = "evopolicygym"
        version = "0.3.0"

        [build-system]
        requires = ["setuptools>=68"]
        build-backend = "setuptools.build_meta"

        [tool.setuptools]
        packages = ["evopolicygym"]
        ''')
    _write(root / "evopolicygym" / "__init__.py", "")
    _write(root / "evopolicygym" / "authoring.py", STAND_IN_AUTHORING)
    _write(root / "evopolicygym" / "policy.py", STAND_IN_POLICY)
    return root


def _stand_in_discovery(module: str) -> tuple[str, ...]:
    found = [{"id": TINY_ID, "entry": TINY_ENTRY, "class": "TinyCounterBenchmark", "profile": None}]
    return ("python3", "-c", f"import json, {module}; print(json.dumps({found!r}))")


@pytest.fixture(scope="module")
def py313(engine: DockerEngine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ImageBuilder, dict[str, str], Path]]:
    """Build (or find) the Python 3.13 images once: (their builder, name -> tag, the root of their packages). Prints each
    image's build time."""
    root = tmp_path_factory.mktemp("py313")
    packages = root / "packages"
    _cartpole_on_313(packages / "cartpole")
    _tiny_package(packages / "tiny_counter")
    with pytest.MonkeyPatch.context() as patch:
        if not (REPO / "compat" / "pyproject.toml").is_file():
            patch.setattr(recipes, "COMPAT_DISTRIBUTION", _stand_in_compat(root / "compat"))
        if not (REPO / "sdk" / "epg_sdk" / "evopolicygym").is_dir():
            patch.setattr(recipes, "discovery_command", _stand_in_discovery)
        builder = ImageBuilder(engine.client, environments=[packages], progress=print)
        started = time.monotonic()
        results = builder.ensure(["policy-runtime-py313", "env-sdk-py313", "env-cartpole-py313", "env-epg-tiny-counter"])
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
    for name in ("policy-runtime-py313", "env-sdk-py313", "env-cartpole-py313", "env-epg-tiny-counter"):
        assert _python_in(engine, tags[name], scope, "import sys; print(sys.version_info[:2])") == "(3, 13)", name
    assert _python_in(engine, tags["policy-runtime-py313"], scope, "import evopolicygym.policy; print('ok')") == "ok"
    assert "grpc" in _python_in(engine, tags["env-sdk-py313"], scope, "import grpc, evopolicygym.authoring; print(grpc.__name__)")
    # the package's `type Count = int` statement runs: a SyntaxError on the Python 3.11 images
    assert _python_in(engine, tags["env-epg-tiny-counter"], scope, "import tiny_counter; print(tiny_counter.Count.__value__.__name__)") == "int"


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
    _image_id, labels = engine.image_labels(tags["env-epg-tiny-counter"]) or ("", {})
    assert label_benchmarks(labels.get(BENCHMARKS, "")) == {TINY_ID: TINY_ENTRY}
    assert json.loads(labels[BENCHMARKS])[0]["class"] == "TinyCounterBenchmark"
    assert not engine.image_exists(tags["env-epg-tiny-counter"] + "-undiscovered")
    package, benchmark_id, entry = resolve_benchmark("tinycounter", builder.packages())
    assert (benchmark_id, entry, package.python, policy_image_of(package)) == (TINY_ID, TINY_ENTRY, "3.13", "policy-runtime-py313")
    assert (package.root / package.table.baseline / "policy.py").is_file()
    listed = invoke_cli("benchmarks", "--json", "--environments", str(packages))
    assert listed.exit_code == 0, listed.stderr
    rows = {row["id"]: row for row in listed.json()["benchmarks"]}
    assert (rows[TINY_ID]["entry"], rows[TINY_ID]["image"], rows[TINY_ID]["python"]) == (TINY_ENTRY, "env-epg-tiny-counter", "3.13")
    assert listed.json()["not_built"] == []
