"""The type checker of `make lint`: strict mypy over the orchestrator and the SDK, the generated code typed by its stubs."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _lint_recipe() -> list[str]:
    lines = (REPO / "Makefile").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(r"lint\s*:", line))
    recipe = []
    for line in lines[start + 1:]:
        if not line.startswith("\t"):
            break
        recipe.append(line.strip())
    return recipe


def test_make_lint_runs_mypy_in_strict_mode_on_the_orchestrator_the_sdk_and_compat():
    assert "$(BIN)/ruff check ." in _lint_recipe() and "$(BIN)/mypy" in _lint_recipe()
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mypy"]
    assert config["strict"] is True and config["warn_unreachable"] is True
    assert config["files"] == ["orchestrator", "sdk/epg_sdk", "compat/evopolicygym"]
    assert "ignore_missing_imports" not in config
    assert all("ignore_missing_imports" not in override for override in config.get("overrides", []))


def test_the_type_checker_refuses_a_misnamed_field_and_a_wrong_enum_value_in_generated_messages(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from epg.v1 import runner_pb2\n"
        "\n"
        "description = runner_pb2.BenchmarkDescription()\n"
        "description.HasField('action_space')\n"
        "description.HasField('no_such_field')\n"
        "record = runner_pb2.EpisodeRecord()\n"
        "record.outcome = runner_pb2.RUNNER_OUTCOME_COMPLETED\n"
        "record.outcome = 'completed'\n"
        "reveal_type(record.outcome)\n"
    )
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", "pyproject.toml", "--cache-dir", str(tmp_path / "cache"), str(probe)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    errors = [line for line in checked.stdout.splitlines() if ": error:" in line]
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert [line.split(":")[1] for line in errors] == ["5", "8"], checked.stdout
    assert "HasField" in errors[0] and "[arg-type]" in errors[0]
    assert "[assignment]" in errors[1]
    assert 'Revealed type is "epg.v1.runner_pb2._RunnerOutcome.ValueType"' in checked.stdout
