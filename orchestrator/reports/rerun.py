"""The Host side of a replay: a Run's spec, seed key and sandbox settings opened again, and its environment image.

Kept apart from `reports.replay` (planning and comparison through the kernel's EpisodeSandbox) because it
wires the engine, the catalogue and the Run's own settings together.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any, Callable

from orchestrator.backends.engine import DockerEngine
from orchestrator.backends.settings import SandboxTuning
from orchestrator.images.catalogue import discover, resolve_benchmark
from orchestrator.records import safe_read
from orchestrator.reports.replay import ReplayError, ReplayReport, check_target, episode_count, replay
from orchestrator.reports.run_records import load_run
from orchestrator.run.driver import sandbox_limits
from orchestrator.run.seed_key import reopen_seed_key
from orchestrator.run.spec import load_spec
from orchestrator.sandbox_opening import SandboxOptions, open_benchmark_sandbox

REPLAY_POOL_SIZE = 4  # pre-started policy containers: a replay is a batch or two
ONE_LANE_BELOW = 16  # Episodes: fewer run on one lane (one runner container to start; results do not depend on the lanes)


def replay_run(run_dir: Path, targets: list[str], *, scope: str = "", base: str = "auto", environments: list[Path] | None = None,
               progress: Callable[[str], None] = lambda message: None) -> tuple[list[ReplayReport], dict[str, Any]]:
    """Replay each target of the Run in run_dir in one sandbox, under the Run's limits, seed key and (when the engine
    still has it) environment image.

    Returns a report per target and the images used. Raises records.schema.RecordError (also for a spec.yaml that is a
    link, not a regular file or larger than safe_read.MAX_TEXT_BYTES), run.spec.SpecError,
    run.seed_key.SeedKeyError, reports.replay.ReplayError, images.catalogue.CatalogueError (bad input) and
    kernel.infrastructure.InfrastructureError.
    """
    run = load_run(run_dir)
    for target in targets:
        check_target(run, target)
    episodes = sum(episode_count(run, target) for target in targets)
    safe_read.read_bytes(run_dir, "spec.yaml", safe_read.MAX_TEXT_BYTES)  # a regular file of the run directory, not a link
    spec, _ = load_spec(run_dir / "spec.yaml")
    _regular_key_file(run.manifest.seed_key_file)
    key = reopen_seed_key(run.manifest.to_json(), run_dir).key
    _, _, entry = resolve_benchmark(run.benchmark, discover(environments))
    environment = (run.manifest.images or {}).get("environment")
    recorded = environment.tag if environment is not None else ""
    present = bool(recorded) and DockerEngine.connect().image_labels(recorded) is not None
    concurrency = 1 if episodes < ONE_LANE_BELOW else spec.sandbox.concurrency
    tuning = SandboxTuning(concurrency=concurrency, pool_size=min(spec.sandbox.pool_size, REPLAY_POOL_SIZE),
                           runtime=spec.sandbox.runtime, isolation=spec.sandbox.isolation)
    options = SandboxOptions(benchmark=run.benchmark, limits=sandbox_limits(spec), tuning=tuning, scope=scope, base=base,
                             environments=environments, environment_image=recorded if present else "",
                             benchmark_entry=entry if present else "")
    with open_benchmark_sandbox(options, progress) as sandbox:
        reports = [replay(run, target, sandbox, key) for target in targets]
        used = sandbox.images.environment
    return reports, {"environment": used, "recorded_environment": recorded or None, "same_image": used == recorded}


def _regular_key_file(named: str | None) -> None:
    """Raise ReplayError unless named, the seed key file run.json names, is missing (reopen_seed_key says so) or a
    regular file: run.json may come from someone else, and a FIFO or a device there would block or feed the reader."""
    if not named:
        return
    try:
        mode = os.stat(named).st_mode
    except OSError:
        return
    if not stat.S_ISREG(mode):
        raise ReplayError(f"{named}: the seed key file run.json names is not a regular file")
