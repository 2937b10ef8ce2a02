"""The SDK, an environment package and the orchestrator install into fresh venvs and work there."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from venvs import REPO, Venv

# Every Benchmark registered by a package of the repository's environments/, read from the sources.
BUNDLED = {benchmark for path in (REPO / "environments").glob("*/pyproject.toml")
           for benchmark in tomllib.loads(path.read_text())["project"]["entry-points"]["epg.benchmarks"]}


def test_environment_package_imports_the_installed_sdk_without_the_orchestrator(environment_venv: Venv, tmp_path: Path):
    code = (
        "import json, importlib.util\n"
        "import epg_env_cartpole, epg_sdk, epg.v1.runner_pb2\n"
        "print(json.dumps({'package': epg_env_cartpole.__file__, 'sdk': epg_sdk.__file__,\n"
        "    'orchestrator': importlib.util.find_spec('orchestrator') is not None,\n"
        "    'benchmark': epg_env_cartpole.make_benchmark().spec.id}))\n"
    )
    result = environment_venv.run(environment_venv.python, "-c", code, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    facts = json.loads(result.stdout)
    assert "site-packages" in facts["package"] and "site-packages" in facts["sdk"]
    assert facts["orchestrator"] is False
    assert facts["benchmark"] == "CartPole-v1"


def test_environment_package_passes_its_own_tests_in_a_fresh_venv(environment_venv: Venv):
    package = REPO / "environments" / "cartpole"
    # tests/image tests the package's image with the orchestrator's pytest plugin: not for a venv with only the SDK.
    result = environment_venv.run(environment_venv.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests",
                                  "--ignore=tests/image", cwd=package, timeout=600)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    summary = result.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "failed" not in summary and "error" not in summary, summary
    print(f"fresh venv timings: {environment_venv.timings}; cartpole tests: {summary}")


def test_environment_package_registers_its_benchmark_as_an_entry_point(environment_venv: Venv, tmp_path: Path):
    code = (
        "import json\n"
        "from importlib.metadata import entry_points\n"
        "print(json.dumps({ep.name: ep.value for ep in entry_points(group='epg.benchmarks')}))\n"
    )
    result = environment_venv.run(environment_venv.python, "-c", code, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"CartPole-v1": "epg_env_cartpole:make_benchmark"}


def test_non_editable_orchestrator_lists_the_bundled_benchmarks(orchestrator_venv: Venv, tmp_path: Path):
    result = orchestrator_venv.run(orchestrator_venv.root / "bin" / "epg-orchestrate", "benchmarks", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    for benchmark in BUNDLED:
        assert benchmark in result.stdout
    print(f"orchestrator venv timings: {orchestrator_venv.timings}")


def test_non_editable_orchestrator_reads_the_bundled_environments_from_its_own_wheel(orchestrator_venv: Venv, tmp_path: Path):
    code = (
        "import json\n"
        "from orchestrator.images.catalogue import discover, resolve_benchmark\n"
        "packages = discover()\n"
        "package, _, entry = resolve_benchmark('cartpole', packages)\n"
        "print(json.dumps({'ids': sorted(b for p in packages for b in p.table.benchmarks), 'root': str(package.root),\n"
        "    'baseline': (package.baseline_dir / 'policy.py').is_file(), 'entry': entry}))\n"
    )
    result = orchestrator_venv.run(orchestrator_venv.python, "-c", code, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    facts = json.loads(result.stdout)
    assert set(facts["ids"]) == BUNDLED and {"CartPole-v1", "Acrobot-v1", "MountainCarContinuous-v0"} <= BUNDLED
    assert "site-packages/orchestrator/bundled_environments/" in facts["root"]
    assert facts["baseline"] is True
    assert facts["entry"] == "epg_env_cartpole:make_benchmark"
