"""A non-editable orchestrator carries what `runs report` and `runs export` need: the export schema, and matplotlib
through its `reports` extra (not a dependency of a plain install)."""

from __future__ import annotations

import json
from pathlib import Path

from support.venvs import Venv


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
