"""The CLI starts lean: `--help` of the command and of every subcommand, in a fresh interpreter, loads none of the
engine's client, grpc, pydantic, the Kubernetes client or matplotlib, and none of the layers that use them.

Both tests run `orchestrator.cli.app.main` in one fresh interpreter each and read `sys.modules` after every help.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, get_args

import typer

from orchestrator.backends.container_spec import RUNTIMES
from orchestrator.backends.settings import ISOLATIONS
from orchestrator.cli import options, runs
from orchestrator.cli.app import app
from orchestrator.reports.export import ProgramForm

REPO = Path(__file__).resolve().parents[2]

# Third-party packages and our modules that no help may load (a name covers its submodules).
HEAVY = ("docker", "grpc", "google.protobuf", "kubernetes", "matplotlib", "numpy", "httpx", "yaml", "gymnasium")
OURS = ("orchestrator.backends", "orchestrator.run", "orchestrator.images", "orchestrator.sandbox_opening", "orchestrator.orphans", "orchestrator.envcheck",
        "orchestrator.suite", "orchestrator.reports", "orchestrator.relay", "orchestrator.hostapi", "orchestrator.scaffold")

# Runs each command line of argv[2] (JSON) in turn, its help captured, and prints what each loaded of argv[1].
_HELPS = """
import contextlib, io, json, sys
from orchestrator.cli.app import main

watched, lines = json.loads(sys.argv[1]), json.loads(sys.argv[2])
results = []
for line in lines:
    sys.argv = ["epg-orchestrate", *line]
    captured = io.StringIO()
    with contextlib.redirect_stdout(captured):
        try:
            main()
            code = 0
        except SystemExit as exc:
            code = exc.code
    loaded = sorted(w for w in watched if any(m == w or m.startswith(w + ".") for m in sys.modules))
    results.append({"line": line, "code": code, "help": captured.getvalue(), "loaded": loaded})
print(json.dumps(results))
"""


def helps(lines: list[list[str]], watched: tuple[str, ...]) -> list[dict]:
    """Each command line's exit code, help text and which of watched it had loaded, from one fresh interpreter."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]), "COLUMNS": "200"}
    result = subprocess.run([sys.executable, "-c", _HELPS, json.dumps(watched), json.dumps(lines)], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def commands() -> dict[tuple[str, ...], Any]:
    """Every command and group of the app by its path (the root is ()), walked through each group's own listing."""
    found: dict[tuple[str, ...], Any] = {}

    def walk(command, path: tuple[str, ...], parent) -> None:
        found[path] = command
        if hasattr(command, "list_commands"):  # typer's groups (its own click)
            context = command.context_class(command, info_name=path[-1] if path else "epg-orchestrate", parent=parent)
            for name in command.list_commands(context):
                walk(command.get_command(context, name), (*path, name), context)

    walk(typer.main.get_command(app), (), None)
    return found


def test_help_loads_no_engine_rpc_validation_cluster_or_plotting_module_and_lists_every_command():
    (result,) = helps([["--help"]], HEAVY + ("pydantic",) + OURS)
    assert result["code"] == 0 and result["loaded"] == []
    listed = {path[0] for path in commands() if len(path) == 1}
    assert len(listed) >= 9 and {name for name in listed if name not in result["help"]} == set()


def test_each_subcommands_help_loads_none_of_them_and_shows_each_of_its_options():
    found = {path: command for path, command in commands().items() if path}
    # pydantic is not watched here: typer (0.29) itself validates a command's parameters with it, --help included.
    results = helps([[*path, "--help"] for path in found], HEAVY + OURS)
    assert len(results) == len(found) >= 25
    for result in results:
        command = found[tuple(result["line"][:-1])]
        assert (result["line"], result["code"], result["loaded"]) == (result["line"], 0, [])
        shown = [opt for param in command.params if getattr(param, "param_type_name", "") == "option" and not param.hidden
             for opt in param.opts]
        assert f"Usage: epg-orchestrate {' '.join(result['line'][:-1])}" in result["help"]
        assert [opt for opt in shown if opt not in result["help"]] == [], result["line"]


def test_the_option_types_spelled_out_for_a_lean_help_match_the_values_they_stand_for():
    assert get_args(options.ContainerRuntime) == RUNTIMES
    assert get_args(options.IsolationMode) == ISOLATIONS
    assert get_args(runs.ProgramFormName) == tuple(form.value for form in ProgramForm)
