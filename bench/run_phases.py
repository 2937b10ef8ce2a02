"""Run-level figures: wall time and Episodes/s of each phase of a published-protocol CartPole Run.

The protocol of examples/core16 (128 train Episodes, every completed Submission validated on
64 Episodes, 256 held-out Episodes for the selected and for the starting Program), on CartPole-v1
with a balancing policy. The agent (a `command` agent in agent-base) submits four times 32
Episodes and thinks `--think-s` seconds after each, as a coding agent would. The same Run goes
twice, alternating: without pre-starting (sandbox.prestart_memory_mib 0) and with the default; then
once more with forked isolation (sandbox.isolation forked), pre-starting as the default.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
SELECTORS = ("0:32", "32:64", "64:96", "96:128")


@dataclass(frozen=True, slots=True)
class PhaseFigures:
    name: str
    seconds: float
    episodes: int

    @property
    def rate(self) -> float:
        return self.episodes / self.seconds if self.seconds > 0 else float("nan")


def agent_script(think_s: float) -> str:
    submits = "; ".join(f"epg-session submit --episodes {s} && sleep {think_s}" for s in SELECTORS)
    return f"{submits}; epg-session finish s0001"


def run_once(program: Path, prestart_mib: int | None, think_s: float, workdir: Path, isolation: str = "container") -> dict[str, PhaseFigures]:
    """One Run; its phases' wall times from the event log, then its close (the end of the Assessment to the
    command's exit: the removal of what is left) and the whole Run (its start to the command's exit)."""
    spec = {
        "benchmark": "CartPole-v1", "seed": 0, "initial_program": str(program),
        "agent": {"kind": "command", "image": "agent-base", "argv": ["sh", "-c", agent_script(think_s)]},
        "budget": {"episodes": 128, "max_submissions": 128, "max_episodes_per_submission": 128, "pool_size": 1024},
        "validation": {"episodes": 64, "candidates": "all_completed"},
        "assessment": {"episodes": 256},
    }
    sandbox: dict[str, object] = {"isolation": isolation}
    if prestart_mib is not None:
        sandbox["prestart_memory_mib"] = prestart_mib
    spec["sandbox"] = sandbox
    spec_path = workdir / f"spec-{prestart_mib}-{isolation}.yaml"
    spec_path.write_text(yaml.safe_dump(spec))
    run_dir = workdir / f"run-{prestart_mib}-{time.monotonic_ns()}"
    result = subprocess.run([sys.executable, "-m", "orchestrator.cli.app", "run", str(spec_path), "-o", str(run_dir), "--json"],
                            capture_output=True, text=True, cwd=REPO, env={**os.environ, "EPG_SCOPE": "bench"})
    exited = time.time()
    if result.returncode != 0:
        raise RuntimeError(f"the Run failed ({result.returncode}): {result.stderr[-2000:]}")
    manifest = json.loads(result.stdout)
    if manifest["terminal_reason"] != "finish_called":
        raise RuntimeError(f"the Run ended {manifest['terminal_reason']}")
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    at = {e["type"]: e["time"] for e in events}
    started = next(e["time"] for e in events if e["type"] == "started")
    candidates = len(manifest["validation"]["candidates"])
    return {
        "agent": PhaseFigures("agent", at["agent_phase_ended"] - started, 128),
        "validation": PhaseFigures("validation", at["validation_done"] - at["agent_phase_ended"], 64 * candidates),
        "assessment": PhaseFigures("assessment", at["assessment_done"] - at["validation_done"], 512),
        "close": PhaseFigures("close", exited - at["assessment_done"], 0),
        "whole Run": PhaseFigures("whole Run", exited - started, 128 + 64 * candidates + 512),
    }


def run_phase_figures(program: Path, think_s: float, prestart_mib: int | None = None) -> dict[str, dict[str, PhaseFigures]]:
    """The Run without pre-starting, with prestart_mib (None: the default), then forked with prestart_mib, in that order."""
    label = "pre-start (default)" if prestart_mib is None else f"pre-start ({prestart_mib} MiB)"
    with tempfile.TemporaryDirectory(prefix="epg-bench-run-") as tmp:
        return {"no pre-start": run_once(program, 0, think_s, Path(tmp)),
                label: run_once(program, prestart_mib, think_s, Path(tmp)),
                f"forked, {label}": run_once(program, prestart_mib, think_s, Path(tmp), "forked")}
