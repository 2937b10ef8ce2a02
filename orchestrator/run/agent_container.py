"""The agent container: its invocation per agent kind, its mounts, and its lifetime."""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from orchestrator.backends.container_spec import BindMount, ContainerRuntime, ContainerSpec
from orchestrator.backends.engine import DockerEngine
from orchestrator.backends.labels import LabelSet
from orchestrator.hostclient.feedback_view import LATEST, SUBMISSIONS, VIEW_DIRECTORY
from orchestrator.kernel.program import SAFE_DIR_FLAGS
from orchestrator.kernel.units import parse_bytes
from orchestrator.records.run_dir import RunDirectory
from orchestrator.run.skills import MOUNT_ROOT as SKILLS_DIR
from orchestrator.run.skills import StoredSkill, store_skills
from orchestrator.run.spec import (
    AiderAgent,
    ClaudeCodeAgent,
    ClineAgent,
    CodexAgent,
    CommandAgent,
    GeminiAgent,
    HillClimbAgent,
    MiniSweAgent,
    OpencodeAgent,
    QwenCodeAgent,
    RandomAgent,
    RunSpec,
    ScriptedAgent,
)
from orchestrator.run.workspace import AgentIdentity, hand_over

AGENT_UID = 10001
WORKSPACE = "/workspace"
HOST_DIR = "/epg/host"
PLAN_DIR = "/epg/agent"
FINISHED_GRACE_S = 10.0


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentExit:
    exit_code: int | None
    timed_out: bool
    seconds: float


def prepare_plan(spec: RunSpec, spec_dir: Path, records: RunDirectory, random_program: Path | None = None) -> Path | None:
    """Copy what a built-in agent reads below agent/plan (mounted read-only); return that directory, or None.

    A scripted agent gets its Programs and plan; the random agent gets random_program, the
    Benchmark package's uniform-random Program (public code, like the baseline).
    """
    agent = spec.agent
    plan_dir = records.agent / "plan"
    if not isinstance(agent, (ScriptedAgent, RandomAgent)):
        return None
    if plan_dir.exists():
        return plan_dir
    if isinstance(agent, RandomAgent):
        if random_program is None:
            raise ValueError("the random agent needs the Benchmark's random Program")
        shutil.copytree(random_program, plan_dir / "random", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        _world_readable(plan_dir)
        return plan_dir
    steps = []
    for number, step in enumerate(agent.steps):
        target = plan_dir / "programs" / str(number)
        shutil.copytree((spec_dir / step.program).resolve(), target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        steps.append({"program": f"programs/{number}", "episodes": step.episodes})
    (plan_dir / "plan.json").write_text(json.dumps({"steps": steps, "finish": agent.finish}, indent=2))
    _world_readable(plan_dir)
    return plan_dir


def prepare_skills(spec: RunSpec, spec_dir: Path, records: RunDirectory) -> tuple[StoredSkill, ...]:
    """The Run's agent skills, stored under records/skills/ and recorded in run.json at the Run's first start.

    A resume takes them from run.json (their stored copies), not again from the Host's directories, so every
    attempt of the agent sees the same skills. Raises run.skills.SkillError for a directory that cannot be stored.
    """
    recorded = records.read_manifest().skills
    if recorded is not None:
        return tuple(StoredSkill(name=item.name, digest=item.digest, files=item.files, bytes=item.bytes) for item in recorded)
    skills = tuple(store_skills(list(spec.agent.skills), spec_dir, records.root / "skills"))
    if skills:
        records.update_manifest(skills=[skill.to_json() for skill in skills])
    return skills


def _world_readable(root: Path) -> None:
    for directory, _, files in os.walk(root):
        os.chmod(directory, 0o755)
        for name in files:
            os.chmod(os.path.join(directory, name), 0o644)


def agent_command(spec: RunSpec) -> tuple[str, ...]:
    agent = spec.agent
    if isinstance(agent, ScriptedAgent):
        return ("python3", "-m", "orchestrator.agents.scripted", f"{PLAN_DIR}/plan.json", "--workspace", WORKSPACE)
    if isinstance(agent, HillClimbAgent):
        return (
            "python3", "-m", "orchestrator.agents.hill_climb", "--workspace", WORKSPACE,
            "--episodes-per-submission", str(agent.episodes_per_submission), "--step-size", str(agent.step_size),
            "--seed", str(agent.seed), "--candidates", str(agent.candidates),
        )
    if isinstance(agent, RandomAgent):
        return ("python3", "-m", "orchestrator.agents.random_program", "--program", f"{PLAN_DIR}/random", "--workspace", WORKSPACE,
                "--episodes-per-submission", str(agent.episodes_per_submission))
    if isinstance(agent, (CodexAgent, ClaudeCodeAgent)):
        return ("python3", "-m", "orchestrator.agents.cli_agent", "--cli", agent.kind, "--model", agent.model,
                "--effort", agent.effort or "", "--workspace", WORKSPACE)
    if isinstance(agent, (GeminiAgent, QwenCodeAgent, OpencodeAgent, AiderAgent, MiniSweAgent, ClineAgent)):
        return ("python3", "-m", "orchestrator.agents.cli_agent", "--cli", agent.kind, "--model", agent.model, "--workspace", WORKSPACE)
    assert isinstance(agent, CommandAgent)
    return tuple(agent.argv)


AGENT = AgentIdentity(uid=AGENT_UID, gid=AGENT_UID)


def agent_identity() -> AgentIdentity | None:
    """Whose uid the agent runs as, when the Host can drop to it (root); None otherwise."""
    return AGENT if os.geteuid() == 0 else None


def hand_workspace_to_agent(records: RunDirectory) -> str:
    """Make program/ and analysis/ writable by the agent; return the container user.

    A root Host gives both trees to AGENT_UID without following anything the
    agent planted (run.workspace.hand_over). Otherwise the agent runs as the
    Host's own uid, which owns them already. The Feedback view EvoPolicyGym's
    agents read (prepare_feedback_view) is the agent's too.
    """
    prepare_feedback_view(records.workspace)
    if os.geteuid() != 0:
        return f"{os.getuid()}:{os.getgid()}"
    hand_over(records.workspace, ("program", "analysis", VIEW_DIRECTORY), AGENT)
    os.chmod(records.workspace, 0o755)
    return f"{AGENT_UID}:{AGENT_UID}"


def prepare_feedback_view(workspace: Path) -> None:
    """Make workspace/.evopolicygym, where `evopolicygym-session` writes EvoPolicyGym's view of each Submission's
    Feedback as the agent, and link feedback/latest.json and feedback/submissions there. Idempotent.

    feedback/ is the Host's, read-only to the agent, so it can plant nothing there; the two links are the
    Host's own and lead only into the agent's directory, through which the Host never reads or writes (the copy
    of the workspace after the agent phase leaves links out).
    """
    os.makedirs(workspace / VIEW_DIRECTORY, mode=0o755, exist_ok=True)
    feedback = os.open(workspace / "feedback", SAFE_DIR_FLAGS)
    try:
        for name in (LATEST, SUBMISSIONS):
            try:
                os.symlink(f"../{VIEW_DIRECTORY}/{name}", name, dir_fd=feedback)
            except FileExistsError:
                pass
    finally:
        os.close(feedback)


def agent_spec(
    *, image: str, spec: RunSpec, records: RunDirectory, labels: LabelSet, user: str, token: str,
    plan_dir: Path | None, memory_bytes: int, runtime: ContainerRuntime = "runc", skills: tuple[StoredSkill, ...] = (),
) -> ContainerSpec:
    """The agent container: the workspace, its read-only feedback/, the Host API's directory, a built-in agent's plan
    and each agent skill read-only at /epg/skills/<name> (EPG_SKILLS names the directory when there is one)."""
    mounts = [
        BindMount(source=str(records.workspace), target=WORKSPACE, read_only=False),
        BindMount(source=str(records.workspace / "feedback"), target=f"{WORKSPACE}/feedback", read_only=True),
        BindMount(source=str(records.host), target=HOST_DIR, read_only=True),
    ]
    if plan_dir is not None:
        mounts.append(BindMount(source=str(plan_dir), target=PLAN_DIR, read_only=True))
    mounts += [BindMount(source=str(records.root / "skills" / skill.store_name), target=f"{SKILLS_DIR}/{skill.name}", read_only=True)
               for skill in skills]
    environment = {
        "HOME": "/tmp",
        "EPG_HOST_API": f"{HOST_DIR}/api.sock",
        "EPG_SESSION_TOKEN": token,
        "EPG_WORKSPACE": WORKSPACE,
    }
    if skills:
        environment["EPG_SKILLS"] = SKILLS_DIR
    if isinstance(spec.agent, CommandAgent):
        environment.update(spec.agent.environment)
    return ContainerSpec(
        image=image,
        command=agent_command(spec),
        labels=labels.for_role("agent"),
        user=user,
        tmpfs={"/tmp": f"rw,nosuid,nodev,size={parse_bytes(spec.limits.agent_tmp)}"},
        shm_bytes=parse_bytes(spec.limits.shm),
        mounts=tuple(mounts),
        memory_bytes=memory_bytes,
        nano_cpus=1_000_000_000,
        pids_limit=256,
        environment=environment,
        working_dir=WORKSPACE,
        hostname="agent",
        log_max_bytes=16 * 1024 * 1024,
        runtime=runtime,
    )


def wait_for_agent(engine: DockerEngine, container: Any, limit_s: float, finished: Callable[[], bool]) -> AgentExit:
    """Wait until the agent exits, its wall-clock limit passes, or it has finished and lingers 10 s."""
    began = time.monotonic()
    finished_at: float | None = None
    while True:
        running, code = engine.state(container)
        if not running:
            return AgentExit(exit_code=code, timed_out=False, seconds=time.monotonic() - began)
        now = time.monotonic()
        if finished() and finished_at is None:
            finished_at = now
        if now - began > limit_s or (finished_at is not None and now - finished_at > FINISHED_GRACE_S):
            engine.kill(container)
            return AgentExit(exit_code=None, timed_out=now - began > limit_s, seconds=now - began)
        time.sleep(0.2)


def save_agent_logs(engine: DockerEngine, container: Any, records: RunDirectory, attempt: int) -> None:
    suffix = "" if attempt == 1 else f".{attempt}"
    (records.agent / f"stdout{suffix}.log").write_bytes(engine.logs(container, stdout=True, stderr=False))
    (records.agent / f"stderr{suffix}.log").write_bytes(engine.logs(container, stdout=False, stderr=True))
