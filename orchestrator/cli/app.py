"""The epg-orchestrate command.

`--help` of the command and of every subcommand loads the command modules only: they import their engine, grpc,
pydantic, Kubernetes and matplotlib users inside the command functions (tests/unit/test_cli_start.py).
"""

from __future__ import annotations

import signal
import sys
from types import FrameType
from typing import Annotated

import typer

from orchestrator.cli import envtest, evaluate, evopolicygym, housekeeping, images, run, runs, suite, view
from orchestrator.cli.common import ExitCode, fail, missing_extra_message, optional_module_missing

app = typer.Typer(
    name="epg-orchestrate",
    help="Run EvoPolicyGym policies in fresh, hardened containers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        from orchestrator.records.provenance import software  # importlib.metadata: only when asked for

        versions = software()
        print(f"epg-orchestrate {versions['orchestrator']} (epg-sdk {versions['epg_sdk'] or 'not installed'}, "
              f"policy ABI {versions['policy_abi']}, Python {versions['python']})")
        raise typer.Exit()


@app.callback()
def main_options(
    version: Annotated[bool, typer.Option("--version", help="Print the versions and exit.", callback=_version, is_eager=True)] = False,
) -> None:
    """Run EvoPolicyGym policies in fresh, hardened containers.

    Exit status of every command: 0 ok, 1 bad input (spec, Program, name, path or record) or a failed check,
    2 usage (unknown option, missing or malformed argument), 3 infrastructure (engine, image build, registry, runner),
    130 stopped by Ctrl-C, SIGTERM or SIGHUP (everything it started is removed first).
    """


app.command("run")(run.run)
app.command("evaluate")(evaluate.evaluate)
app.add_typer(runs.spec_app, name="spec")
app.add_typer(runs.runs_app, name="runs")
app.add_typer(suite.app, name="suite")
app.add_typer(images.app, name="images")
app.add_typer(envtest.app, name="env")
app.add_typer(evopolicygym.app, name="evopolicygym")
app.command("gc")(housekeeping.gc)
app.command("benchmarks")(housekeeping.benchmarks)
app.command("view")(view.view)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    """SIGTERM and SIGHUP end a command as Ctrl-C does: its sandbox, agent and relay are closed and their
    containers removed on the way out, and a Run can be resumed (`run --resume`)."""
    signal.signal(signum, signal.SIG_DFL)  # a second signal ends the process at once
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def main() -> None:
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _interrupt)
    try:
        app()
    except ImportError as exc:
        # The commands check their optional packages before they start; this is for one imported deeper on the way.
        module = optional_module_missing(exc)
        if module is None:
            raise
        try:
            fail(missing_extra_message(module, "this command"), ExitCode.INFRASTRUCTURE, error_code="missing_extra")
        except typer.Exit as exit_:
            sys.exit(exit_.exit_code)


if __name__ == "__main__":
    main()
