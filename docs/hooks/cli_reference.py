"""MkDocs hook: hands the epg-orchestrate command to mkdocs-click, which renders docs/reference/cli.md from it.

typer's app is a click application; `typer.main.get_command` returns its click command. mkdocs-click imports
the module its directive names, so this hook registers itself under the name `epg_cli_reference`.
"""

from __future__ import annotations

import sys

import typer

from orchestrator.cli.app import app

#: The click command of `orchestrator.cli.app.app`: every command, option and help text of the reference.
command = typer.main.get_command(app)

sys.modules.setdefault("epg_cli_reference", sys.modules[__name__])
