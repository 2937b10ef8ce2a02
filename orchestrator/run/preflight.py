"""Everything a Run checks before it starts anything, as `field.path: reason` lines (`spec check` and `run` share it)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Mapping

from orchestrator.images.catalogue import CatalogueError, EnvironmentPackage, resolve_benchmark
from orchestrator.kernel.program import ProgramError, capture_program
from orchestrator.records.run_dir import RunDirectory
from orchestrator.run.relay_setup import RelayConfigError, relay_policy
from orchestrator.run.seed_key import SeedKeyError, read_key
from orchestrator.run.skills import SkillError, read_skill
from orchestrator.run.spec import CommandAgent, RandomAgent, RunSpec, ScriptedAgent

# The agent images the orchestrator builds itself; any other name must be an image the engine has.
BUILT_AGENT_IMAGES = ("agent-base",)


def preflight(
    spec: RunSpec,
    spec_dir: Path,
    packages: list[EnvironmentPackage],
    *,
    run_dir: Path | None = None,
    image_exists: Callable[[str], bool] | None = None,
    environ: Mapping[str, str] = os.environ,
) -> list[str]:
    """Return the problems that would stop this Run (empty when it can start).

    Checked: the Benchmark is known; every Program the spec names (initial_program,
    a scripted agent's steps, the random/ Program of the Benchmark's package for the
    random agent) is a directory holding a valid Program; every agent skill is a
    directory with SKILL.md within the skills' bounds; the seed-key file exists
    and holds a key; the relay's credential is set; a command agent's image
    exists (when image_exists is given); run_dir holds no Run yet.
    """
    unknown_benchmark = preflight_benchmark(spec, packages)
    problems = list(unknown_benchmark)
    if spec.initial_program is not None:
        problems += _program("initial_program", spec_dir / spec.initial_program)
    if isinstance(spec.agent, ScriptedAgent):
        for number, step in enumerate(spec.agent.steps):
            problems += _program(f"agent.steps.{number}.program", spec_dir / step.program)
    if isinstance(spec.agent, RandomAgent) and not unknown_benchmark:
        package, _, _ = resolve_benchmark(spec.benchmark, packages)
        problems += [f"{problem} (the random agent submits its Benchmark package's random/ Program)"
                     for problem in _program("agent.kind", package.random_dir)]
    for number, skill in enumerate(spec.agent.skills):
        try:
            read_skill(spec_dir / skill)
        except SkillError as exc:
            problems.append(f"agent.skills.{number}: {exc}")
    if spec.seed_key_file is not None:
        try:
            read_key(spec_dir / Path(spec.seed_key_file).expanduser())
        except SeedKeyError as exc:
            problems.append(f"seed_key_file: {exc}")
    try:
        relay_policy(spec, environ)
    except RelayConfigError as exc:
        problems.append(f"relay.{exc.field}: {exc}")
    if isinstance(spec.agent, CommandAgent) and spec.agent.image not in BUILT_AGENT_IMAGES and image_exists is not None:
        if not image_exists(spec.agent.image):
            problems.append(f"agent.image: the engine has no image {spec.agent.image!r} (build or pull it first)")
    if run_dir is not None and RunDirectory(run_dir).events_path.exists():
        problems.append(f"output: {run_dir} already holds a Run; use --resume to continue it")
    return problems


def preflight_benchmark(spec: RunSpec, packages: list[EnvironmentPackage]) -> list[str]:
    """The problem with the spec's Benchmark name (unknown or ambiguous), if any."""
    try:
        resolve_benchmark(spec.benchmark, packages)
    except CatalogueError as exc:
        return [f"benchmark: {exc}"]
    return []


def _program(field: str, path: Path) -> list[str]:
    if not path.is_dir():
        return [f"{field}: {path} is not a directory"]
    try:
        capture_program(path)
    except ProgramError as exc:
        return [f"{field}: {exc.message}"]
    return []
