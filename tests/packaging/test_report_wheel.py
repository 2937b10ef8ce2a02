"""A non-editable orchestrator carries what `runs report` and `runs export` need: matplotlib and the export schema."""

from __future__ import annotations

import json
from pathlib import Path

from support.venvs import Venv


def test_non_editable_orchestrator_draws_plots_and_carries_the_export_schema(orchestrator_venv: Venv, tmp_path: Path):
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
