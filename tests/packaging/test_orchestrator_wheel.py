"""The orchestrator installed non-editable in a fresh venv (the `orchestrator_venv` fixture): it lists the bundled
Benchmarks, reads the bundled environments from its own wheel, and carries what `runs report` and `runs export` need:
the export schema, and matplotlib through its `reports` extra (not a dependency of a plain install).

The three tests share one venv, so they stay in one file: pytest-xdist gives a file to one process, which builds the
session's venv once. The last one adds the reports extra to it.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from support.venvs import REPO, Venv

# Every Benchmark registered by a package of the repository's environments/, read from the sources.
BUNDLED = {benchmark for path in (REPO / "environments").glob("*/pyproject.toml")
           for benchmark in tomllib.loads(path.read_text())["project"]["entry-points"]["epg.benchmarks"]}


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


def test_non_editable_orchestrator_draws_plots_and_carries_the_export_schema(orchestrator_venv: Venv, tmp_path: Path):
    plain = orchestrator_venv.run(orchestrator_venv.python, "-c", "import matplotlib", cwd=tmp_path)
    assert plain.returncode == 1 and "No module named 'matplotlib'" in plain.stderr  # the plots are the reports extra
    # The installed distribution's own metadata names what its extra brings.
    orchestrator_venv.pip_install("epg-orchestrator[reports]", step="install the reports extra")
    code = (
        "import json\n"
        "from orchestrator.reports.export import SCHEMA_FILE, export_schema\n"
        "from orchestrator.reports.plots import FIGURE_PX\n"
        "import matplotlib\n"
        "print(json.dumps({'file': str(SCHEMA_FILE), 'title': export_schema()['title'], 'size': list(FIGURE_PX)}))\n"
    )
    result = orchestrator_venv.run(orchestrator_venv.python, "-c", code, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    facts = json.loads(result.stdout)
    assert "site-packages/orchestrator/reports/export.schema.json" in facts["file"]
    assert facts["title"].startswith("epg.export/1") and facts["size"] == [800, 340]
