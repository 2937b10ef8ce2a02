"""The epg-orchestrate command."""

from __future__ import annotations

import typer

from orchestrator.cli import envtest, evaluate, housekeeping, images, run

app = typer.Typer(
    name="epg-orchestrate",
    help="Run EvoPolicyGym policies in fresh, hardened containers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("run")(run.run)
app.command("evaluate")(evaluate.evaluate)
app.add_typer(run.spec_app, name="spec")
app.add_typer(run.runs_app, name="runs")
app.add_typer(images.app, name="images")
app.add_typer(envtest.app, name="env")
app.command("gc")(housekeeping.gc)
app.command("benchmarks")(housekeeping.benchmarks)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
