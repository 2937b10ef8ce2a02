"""The suite file (YAML), validated with pydantic, and its plan: one Run spec per Benchmark, agent and repeat."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from orchestrator.images.catalogue import CatalogueError, EnvironmentPackage, resolve_benchmark
from orchestrator.run.spec import (
    AgentSpec,
    AssessmentSpec,
    BudgetSpec,
    LimitsSpec,
    RelaySpec,
    RunSpec,
    SandboxSpec,
    ScriptedAgent,
    ValidationSpec,
    yaml_problem,
)
from orchestrator.suite.presets import PRESETS, family_of

_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SuiteAgent(_Strict):
    name: str = Field(pattern=_NAME, max_length=64, description="Display name in the report and in run directory names.")
    agent: AgentSpec = Field(description="An agent block as in a Run spec.")
    relay: RelaySpec = RelaySpec()


class ProtocolSpec(_Strict):
    """What every Run of the suite shares, as in a Run spec."""

    budget: BudgetSpec = BudgetSpec()
    validation: ValidationSpec = ValidationSpec()
    assessment: AssessmentSpec = AssessmentSpec()
    limits: LimitsSpec = LimitsSpec()
    sandbox: SandboxSpec = SandboxSpec()


class SuiteSpec(_Strict):
    """Benchmarks x agents x repeats under one protocol."""

    name: str = Field(pattern=_NAME, max_length=64)
    benchmarks: Union[str, list[str]] = Field(
        description="Benchmark ids or aliases, or a preset (" + ", ".join(sorted(PRESETS)) + "), alone or among the names."
    )
    agents: list[SuiteAgent] = Field(min_length=1)
    repeats: int = Field(default=1, ge=1, description="Runs per Benchmark and agent; repeat r has the Run seed seed + r.")
    seed: int = Field(default=0, ge=0, description="Run seed of the first repeat (every agent gets the same hidden Episodes).")
    seed_key_file: str | None = Field(default=None, description="As in a Run spec, relative to the suite file; shared by every Run.")
    protocol: ProtocolSpec = ProtocolSpec()
    runs_at_once: int = Field(default=1, ge=1, description="How many Runs may go at once on this machine.")
    output: str | None = Field(default=None, description="Suite directory; default suites/<name>-<time>.")

    @model_validator(mode="after")
    def _distinct_agents(self) -> SuiteSpec:
        names = [agent.name for agent in self.agents]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"agents: names must be distinct ({', '.join(twice)} twice)")
        return self

    def benchmark_names(self) -> list[str]:
        """The Benchmark names as given, presets expanded, in order."""
        given = [self.benchmarks] if isinstance(self.benchmarks, str) else self.benchmarks
        return [name for item in given for name in PRESETS.get(item.lower(), (item,))]


class SuiteSpecError(Exception):
    """The suite file is unreadable or invalid, or its plan is impossible. `problems` lists "field.path: reason" lines."""

    def __init__(self, path: Path, problems: list[str]) -> None:
        super().__init__(f"{path}: " + "; ".join(problems))
        self.path = path
        self.problems = problems


MAX_SUITE_BYTES = 1 << 20


def load_suite(path: Path, text: str | None = None) -> tuple[SuiteSpec, str]:
    """Return the validated suite and its text as given (text: the file's text, already read from path). Raises
    SuiteSpecError.

    The file is read as a regular file of at most MAX_SUITE_BYTES, opened without blocking (a FIFO is refused).
    """
    if text is None:
        text = _read_suite_file(path)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SuiteSpecError(path, [yaml_problem(exc)]) from None
    if not isinstance(data, dict):
        raise SuiteSpecError(path, ["the suite must be a mapping of keys to values"])
    try:
        return SuiteSpec.model_validate(data), text
    except ValidationError as exc:
        raise SuiteSpecError(path, [_problem(error) for error in exc.errors()]) from exc


def _read_suite_file(path: Path) -> str:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as exc:
        raise SuiteSpecError(path, [f"cannot read: {exc.strerror}"]) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SuiteSpecError(path, ["cannot read: not a regular file"])
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = handle.read(MAX_SUITE_BYTES + 1)
    except OSError as exc:
        raise SuiteSpecError(path, [f"cannot read: {exc.strerror}"]) from None
    finally:
        os.close(fd)
    if len(data) > MAX_SUITE_BYTES:
        raise SuiteSpecError(path, [f"cannot read: larger than {MAX_SUITE_BYTES} bytes"])
    return data.decode("utf-8", errors="replace")


def _problem(error: Mapping[str, Any]) -> str:
    """One line for one of pydantic's errors (a `pydantic_core.ErrorDetails`): `location: reason`."""
    parts = [str(part) for part in error["loc"]]
    # Drop the tags pydantic adds for a union: the agent kind, and the str-or-list of benchmarks.
    parts = [part for index, part in enumerate(parts) if not (index and parts[index - 1] == "agent")
             and part not in ("str", "list[str]")]
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        message = "unknown key"
    return f"{'.'.join(parts) or '(top level)'}: {message}"


@dataclass(frozen=True, slots=True, kw_only=True)
class PlannedRun:
    """One Run of a suite: where it lives in the suite directory and the Run spec it is made of."""

    name: str
    benchmark: str
    family: str
    agent: str
    repeat: int
    spec: RunSpec

    @property
    def run_dir(self) -> str:
        return f"runs/{self.name}"

    @property
    def spec_file(self) -> str:
        return f"specs/{self.name}.yaml"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "benchmark": self.benchmark, "family": self.family, "agent": self.agent,
                "repeat": self.repeat, "seed": self.spec.seed, "run_dir": self.run_dir, "spec": self.spec_file}


def run_name(benchmark: str, agent: str, repeat: int) -> str:
    """A run directory's name: the Benchmark id in lower case, the agent's name, the repeat."""
    slug = re.sub(r"[^a-z0-9.-]+", "-", benchmark.lower()).strip("-")
    return f"{slug}--{agent}--r{repeat}"


def plan_suite(suite: SuiteSpec, suite_dir: Path, packages: list[EnvironmentPackage]) -> list[PlannedRun]:
    """Every Run of the suite, Benchmark by Benchmark, then agent, then repeat. Raises SuiteSpecError.

    Names resolve through the catalogue (aliases allowed); a Benchmark named twice is an error.
    Paths the Run specs name (seed_key_file, a scripted agent's Programs) are made absolute
    against suite_dir, the suite file's directory.
    """
    resolved: list[tuple[str, str]] = []
    problems: list[str] = []
    for number, name in enumerate(suite.benchmark_names()):
        try:
            package, benchmark_id, _ = resolve_benchmark(name, packages)
        except CatalogueError as exc:
            problems.append(f"benchmarks.{number}: {exc}")
            continue
        if any(benchmark_id == seen for seen, _ in resolved):
            problems.append(f"benchmarks.{number}: {benchmark_id} is named twice")
            continue
        resolved.append((benchmark_id, family_of(benchmark_id, package.image)))
    if problems:
        raise SuiteSpecError(suite_dir, problems)
    problems = name_collisions([benchmark for benchmark, _ in resolved], [agent.name for agent in suite.agents], suite.repeats)
    if problems:
        raise SuiteSpecError(suite_dir, problems)
    return [
        PlannedRun(name=run_name(benchmark, entry.name, repeat), benchmark=benchmark, family=family, agent=entry.name,
                   repeat=repeat, spec=_run_spec(suite, entry, benchmark, repeat, suite_dir))
        for benchmark, family in resolved for entry in suite.agents for repeat in range(suite.repeats)
    ]


def name_collisions(benchmarks: list[str], agents: list[str], repeats: int) -> list[str]:
    """A "field.path: reason" line for each Run whose directory name (run_name) another Run of the suite already has,
    compared without case (a case-insensitive file system would give them one directory too).

    The line names the field of the later of the two (benchmarks.N or agents.N.name), and both Runs.
    """
    seen: dict[str, tuple[int, int, int]] = {}
    problems: dict[str, str] = {}  # one line per field
    for b, benchmark in enumerate(benchmarks):
        for a, agent in enumerate(agents):
            for repeat in range(repeats):
                name = run_name(benchmark, agent, repeat)
                earlier = seen.setdefault(name.lower(), (b, a, repeat))
                if earlier == (b, a, repeat):
                    continue
                other = f"{benchmarks[earlier[0]]} with agent {agents[earlier[1]]}, repeat {earlier[2]}"
                where = f"benchmarks.{b}" if b != earlier[0] else f"agents.{a}.name"
                problems.setdefault(where, f"{where}: {benchmark} with agent {agent}, repeat {repeat} would share the run directory "
                                f"runs/{name} with {other}; rename one of them")
    return list(problems.values())


def _run_spec(suite: SuiteSpec, entry: SuiteAgent, benchmark: str, repeat: int, suite_dir: Path) -> RunSpec:
    agent = entry.agent
    if isinstance(agent, ScriptedAgent):
        steps = [step.model_copy(update={"program": str((suite_dir / step.program).resolve())}) for step in agent.steps]
        agent = agent.model_copy(update={"steps": steps})
    key = str((suite_dir / Path(suite.seed_key_file).expanduser()).resolve()) if suite.seed_key_file else None
    protocol = suite.protocol
    return RunSpec(
        benchmark=benchmark, agent=agent, budget=protocol.budget, validation=protocol.validation,
        assessment=protocol.assessment, limits=protocol.limits, sandbox=protocol.sandbox, relay=entry.relay,
        seed=suite.seed + repeat, seed_key_file=key,
    )


def spec_yaml(spec: RunSpec) -> str:
    """The Run spec as the YAML file `epg-orchestrate run` reads (defaults written out)."""
    return yaml.safe_dump(spec.model_dump(mode="json"), sort_keys=False)
