"""A Run from start to end: Episode pool, Host API, agent, Validation, Assessment; resumable after a crash.

Phases, each recorded in events.jsonl so that `--resume` continues where a
killed orchestrator stopped: "agent" (the agent works; Submissions), then
"validation", then "assessment", then "done". A phase ends in three writes: its
results (validation.json, the manifest's fields), then the event that ends it,
then run.json's phase. A crash between any two is harmless: readers show the
later of the log's phase and run.json's (`RunDirectory.read_manifest`), and a
resume first catches run.json up with every phase end the log records whose
results are in place (`catch_up`), so it neither starts another agent nor
evaluates a finished phase again; it resumes from run.json's phase, so a phase
whose results are gone is run again.

The agent phase ends in one order, whatever ended it: the agent's container
stops; the Host API refuses Submit and Finish (`session_closed`); a
Submission still in flight is given the time its Episodes may take
(settle_timeout_s), then cancelled and voided; its last event is logged; the
Host API stops; then `agent_exited`, the copy-out of the workspace and
Validation. So no Episode of a Submission shares the lanes with a held-out
one, and nothing of the agent phase is written after it ended.
"""

from __future__ import annotations

import math
import secrets
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from epg_sdk.runtime.episode_loop import EpisodeLimits
from orchestrator.agents.cli_agent import MCP_KINDS
from orchestrator.backends.engine import DockerEngine
from orchestrator.backends.kubernetes.manifests import ClusterTarget
from orchestrator.backends.labels import LabelSet, sandbox_labels
from orchestrator.backends.lanes import episode_budget_s
from orchestrator.backends.settings import SandboxImages, SandboxLimits, SandboxTuning, benchmark_limits
from orchestrator.hostapi.server import serve
from orchestrator.images.builder import BuildResult, ImageBuilder
from orchestrator.images.catalogue import EnvironmentPackage, resolve_benchmark
from orchestrator.images.recipes import policy_image_of
from orchestrator.kernel.evaluation import evaluate_programs
from orchestrator.kernel.infrastructure import InfraErrorCode, InfrastructureError
from orchestrator.kernel.ports import BenchmarkInfo, PlannedEpisode, PooledSandbox
from orchestrator.kernel.program import Program, capture_program
from orchestrator.kernel.seeds import keyed_seed
from orchestrator.kernel.selection import CandidateResult, every_completed, fallback_candidates, select_candidate
from orchestrator.kernel.session import Budget, FinishPolicy, SessionState
from orchestrator.kernel.units import parse_bytes
from orchestrator.records import provenance, schema
from orchestrator.records.atomic import PUBLIC_DIRECTORY, PUBLIC_FILE, make_directory, write_bytes, write_json
from orchestrator.records.events import (
    AgentExited,
    AgentPhaseEnded,
    AgentStarted,
    AssessmentDone,
    Created,
    Phase,
    Prestart,
    RunEvent,
    Started,
    TerminalReason,
    ValidationDone,
)
from orchestrator.records.feedback import feedback_json
from orchestrator.records.models import AssessmentReport, RunManifest, ValidationReport
from orchestrator.records.progress import Notify, RunProgress
from orchestrator.records.run_dir import RunDirectory
from orchestrator.relay.server import ModelRelay
from orchestrator.run import agent_container, workspace_fs
from orchestrator.run.host import RunHost
from orchestrator.run.instructions import render_instructions
from orchestrator.run.relay_setup import AGENT_IMAGES, relay_policy
from orchestrator.run.seed_key import open_seed_key, reopen_seed_key
from orchestrator.run.skills import StoredSkill
from orchestrator.run.spec import CommandAgent, RunSpec
from orchestrator.sandbox_opening import KubernetesOptions, SandboxSetup, connect_engine, open_sandbox

E = TypeVar("E", AgentPhaseEnded, ValidationDone, AssessmentDone)

# What an idle pooled policy container holds (make bench prints it: "memory of one idle pooled container").
IDLE_POLICY_CONTAINER_MIB = 18
# The Host's wait for a batch's Feedback (the runner's BuildFeedback), on top of its Episodes.
FEEDBACK_WAIT_S = 120.0
# When the agent phase ends on an error (or Ctrl-C), a Submission in flight is cancelled at once and gets this long.
INTERRUPTED_SETTLE_S = 5.0
# How long the Host API server lets a settled call send its answer once the agent phase has ended.
STOP_GRACE_S = 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class RunOptions:
    spec: RunSpec
    spec_text: str
    spec_dir: Path
    run_dir: Path
    resume: bool = False
    scope: str = ""
    base: str = "auto"
    environments: list[Path] | None = None


def budget_of(spec: RunSpec) -> Budget:
    return Budget(
        episodes=spec.budget.episodes,
        max_submissions=spec.budget.max_submissions,
        pool_size=spec.budget.pool_size,
        max_episodes_per_submission=spec.budget.max_episodes_per_submission,
        finish_policy=FinishPolicy(spec.budget.finish),
        max_candidates=spec.validation.max_candidates,
    )


def _agent_image(spec: RunSpec, built_agent_base: str) -> str:
    """The agent's image: ours for the built-in agents and for a command agent naming "agent-base"."""
    if isinstance(spec.agent, CommandAgent) and spec.agent.image != "agent-base":
        return spec.agent.image
    return built_agent_base


def sandbox_limits(spec: RunSpec) -> SandboxLimits:
    limits = spec.limits
    return SandboxLimits(
        memory_bytes=parse_bytes(limits.policy_memory),
        cpus=limits.policy_cpus,
        pids=limits.policy_pids,
        tmpfs_bytes=parse_bytes(limits.policy_tmp),
        shm_bytes=parse_bytes(limits.shm),
        episode=EpisodeLimits(
            step_deadline_s=limits.step_deadline_s,
            episode_deadline_s=limits.episode_deadline_s,
            startup_deadline_s=limits.startup_deadline_s,
        ),
        # A deadline the spec sets wins over the Benchmark's own time limit; a default one gives way to it.
        chosen_deadlines=frozenset(limits.model_fields_set & {"step_deadline_s", "episode_deadline_s"}),
    )


def settle_timeout_s(limits: EpisodeLimits, episodes: int, lanes: int) -> float:
    """The longest a Submission of `episodes` Episodes may still take on `lanes` lanes: its Episodes lane by lane,
    each at most the Host's wait for one Episode (its start and Episode deadlines), then its Feedback."""
    return math.ceil(max(0, episodes) / max(1, lanes)) * episode_budget_s(limits) + FEEDBACK_WAIT_S


def kubernetes_options(spec: RunSpec) -> KubernetesOptions | None:
    """The cluster of sandbox.backend kubernetes, or None for the Docker engine."""
    if spec.sandbox.backend != "kubernetes":
        return None
    kube = spec.sandbox.kubernetes
    return KubernetesOptions(target=ClusterTarget(context=kube.context, namespace=kube.namespace),
                             registry_prefix=kube.registry_prefix, runtime_class_name=kube.runtime_class_name)


def _last_after(events: list[RunEvent], kind: type[E], after: tuple[type[RunEvent], ...]) -> E | None:
    """The last event of kind logged after the last event of one of the after kinds (from the start without one)."""
    start = max((i for i, e in enumerate(events) if isinstance(e, after)), default=-1)
    found = [e for e in events[start + 1:] if isinstance(e, kind)]
    return found[-1] if found else None


def catch_up(records: RunDirectory) -> str:
    """Bring run.json's phase up to every phase end the event log records after it whose results are in place; return
    what was caught up ("" for nothing). Raises schema.RecordError.

    The agent phase's end needs nothing more than its event (the workspace is copied out before it), Validation's its
    validation.json and run.json's validation fields, the Assessment's its assessment.json and run.json's assessment.
    """
    manifest, events, done = records.read_stored_manifest() or RunManifest(), records.events(), []
    if manifest.current_phase is Phase.AGENT:
        ended = _last_after(events, AgentPhaseEnded, (AgentStarted,))
        if ended is None:
            return ""
        manifest = records.update_manifest(phase=Phase.VALIDATION, terminal_reason=manifest.terminal_reason or ended.terminal_reason)
        done.append("the agent phase had ended")
    if manifest.current_phase is Phase.VALIDATION:
        validated = _last_after(events, ValidationDone, (AgentPhaseEnded,))
        if validated is None or manifest.validation is None or not (records.root / "validation.json").is_file():
            return "; ".join(done)
        manifest = records.update_manifest(phase=Phase.DONE if validated.selected is None else Phase.ASSESSMENT)
        done.append("Validation was done")
    if manifest.current_phase is Phase.ASSESSMENT:
        assessed = _last_after(events, AssessmentDone, (ValidationDone,))
        if assessed is None or manifest.assessment is None or not (records.root / "assessment.json").is_file():
            return "; ".join(done)
        records.update_manifest(phase=Phase.DONE)
        done.append("the Assessment was done")
    return "; ".join(done)


class ParametersChanged(Exception):
    """A Run is resumed against an environment image whose Benchmark has other parameters than the Run recorded."""


def check_parameters(manifest: RunManifest, digest: str, benchmark_id: str, run_dir: Path) -> None:
    """Raise ParametersChanged when manifest records a parameters digest other than digest: a resume against an image
    whose Benchmark has other parameters, whose results would not be comparable with the Run's. A manifest written
    before the digest existed records none and passes."""
    recorded = manifest.parameters_digest
    if recorded and recorded != digest:
        raise ParametersChanged(
            f"{run_dir}: this Run was measured with the parameters {recorded} of {benchmark_id}, but the environment image "
            f"now describes it with the parameters {digest}; resume it with the image it was created with "
            "(run.json's images.environment), or start a new Run")


class RunDriver:
    """Executes one Run. Not thread-safe: one driver per run directory."""

    def __init__(self, options: RunOptions, notify: Notify) -> None:
        self._options = options
        self._spec = options.spec
        self._records = RunDirectory(options.run_dir)
        self._notify = notify
        self._skills: tuple[StoredSkill, ...] = ()
        self._parameters_digest = ""  # the Benchmark's, once the sandbox described it
        self._benchmark_info: BenchmarkInfo | None = None
        self._policy_image = "policy-runtime"  # the policy runtime of the Benchmark package's Python, once resolved

    def execute(self) -> RunManifest:
        """Run (or resume) the Run; return run.json. Raises InfrastructureError, FileExistsError, ParametersChanged (a
        resume against a Benchmark whose parameters digest differs from run.json's)."""
        options, records = self._options, self._records
        if options.resume:
            if not records.events_path.exists():
                raise FileNotFoundError(f"{options.run_dir} holds no Run to resume")
            if self._phase() is Phase.DONE:
                return records.read_manifest()
        # The secret of every hidden Episode: read once, before anything starts; only its id is recorded.
        self._seed_key = (reopen_seed_key(records.read_manifest().to_json(), options.run_dir) if options.resume
                          else open_seed_key(self._spec.seed_key_file, options.spec_dir, options.run_dir))
        if options.resume:
            caught_up = catch_up(records)
            if caught_up:
                self._notify(RunProgress.NOTE, {"message": f"run.json caught up with the event log: {caught_up}"})
        started = time.monotonic()
        engine = connect_engine(lambda m: self._notify(RunProgress.NOTE, {"message": m}))
        builder = ImageBuilder(engine.client, base=options.base, environments=options.environments,
                               progress=lambda m: self._notify(RunProgress.NOTE, {"message": m}))
        package, self._benchmark_id, entry = resolve_benchmark(self._spec.benchmark, builder.packages())
        self._random_program = package.random_dir
        relay_policy(self._spec)  # a missing credential is said before anything starts
        agent_image = AGENT_IMAGES.get(self._spec.agent.kind, "agent-base")
        self._policy_image = policy_image_of(package)  # policy-runtime, or policy-runtime-py313 for a Python 3.13 package
        built = {r.name: r for r in builder.ensure([self._policy_image, package.image, agent_image])}
        tags = {name: result.tag for name, result in built.items()}
        images = SandboxImages(environment=tags[package.image], policy_runtime=tags[self._policy_image], benchmark_entry=entry)
        labels = sandbox_labels(options.scope)
        try:
            if not options.resume:
                self._create(package.baseline_for(self._benchmark_id))
            elif self._phase() is Phase.AGENT:
                self._bound_workspace()
            self._record_provenance(engine, built, package, agent_image)
            records.append(Started(resume=options.resume, owner=labels.owner, sandbox=labels.sandbox))
            tuning = SandboxTuning(concurrency=self._spec.sandbox.concurrency, pool_size=self._spec.sandbox.pool_size,
                                   runtime=self._spec.sandbox.runtime, isolation=self._spec.sandbox.isolation)
            setup = SandboxSetup(labels=labels, limits=sandbox_limits(self._spec), tuning=tuning, kubernetes=kubernetes_options(self._spec))
            with open_sandbox(engine, images, setup, lambda m: self._notify(RunProgress.NOTE, {"message": m})) as sandbox:
                benchmark = sandbox.describe()
                self._parameters_digest = benchmark.parameters_digest
                self._benchmark_info = benchmark
                self._check_parameters(benchmark.parameters_digest)
                # What a reader of the records needs to compare scores: the metric and which way is better, and the
                # identity of the Benchmark's parameters every result of the Run was measured under.
                records.update_manifest(metric={"name": benchmark.primary_metric, "direction": benchmark.direction},
                                        parameters_digest=benchmark.parameters_digest)
                episode_pool = self._episode_pool(sandbox)
                state = SessionState.replay(budget_of(self._spec), [event.to_json() for event in records.events()])
                self._skills = agent_container.prepare_skills(self._spec, options.spec_dir, records)
                instructions = render_instructions(benchmark, state.budget,
                                                   all_completed_are_candidates=self._spec.validation.candidates == "all_completed",
                                                   skills=[skill.name for skill in self._skills],
                                                   mcp_tools=self._spec.agent.kind in MCP_KINDS)
                write_bytes(records.task, instructions.encode(), mode=PUBLIC_FILE)
                write_bytes(records.workspace / "TASK.md", instructions.encode(), mode=PUBLIC_FILE)
                host = RunHost(records=records, sandbox=sandbox, benchmark=benchmark, state=state, episode_pool=episode_pool,
                               instructions=instructions, agent=agent_container.agent_identity(), notify=self._notify,
                               bulk_artifacts_bytes=self._spec.records.bulk_artifacts_bytes)
                recovered = host.recover_in_flight()
                if recovered:
                    self._notify(RunProgress.NOTE, {"message": recovered})
                if self._phase() is Phase.AGENT:
                    self._prestart(sandbox, Phase.AGENT)
                    reason = self._agent_phase(engine, host, labels, tags[agent_image], sandbox, tuning.lanes())
                    workspace_fs.unmount_into_directory(records.root, records.workspace)
                    records.append(AgentPhaseEnded(terminal_reason=reason))  # the phase ends here, then its cache
                    records.update_manifest(phase=Phase.VALIDATION, terminal_reason=reason)
                if self._phase() is Phase.VALIDATION:
                    self._validation_phase(sandbox, state, benchmark.direction)
                if self._phase() is Phase.ASSESSMENT:
                    self._assessment_phase(sandbox)
                sandbox.container_pool.resize(0)  # nothing follows: start no more containers before the container pool closes
        finally:
            # A workspace mount outlives no orchestrator that exits: resume mounts it again.
            workspace_fs.release(records.workspace)
            if records.manifest_path.exists():
                self._record_accounting(time.monotonic() - started)
        return records.read_manifest()

    def _check_parameters(self, digest: str) -> None:
        """Raise ParametersChanged when run.json records a parameters digest other than digest."""
        check_parameters(self._records.read_manifest(), digest, self._benchmark_id, self._records.root)

    def _phase(self) -> Phase:
        """The phase to run: run.json's (a resume catches it up first)."""
        stored = self._records.read_stored_manifest()
        return stored.current_phase if stored is not None else Phase.AGENT

    # provenance ------------------------------------------------------------------
    def _record_provenance(self, engine: DockerEngine, built: dict[str, BuildResult], package: EnvironmentPackage, agent_image: str) -> None:
        """What this invocation runs with: software, images (tag and id) and the Benchmark package (a resume may differ)."""
        agent = _agent_image(self._spec, built[agent_image].tag)
        if agent == built[agent_image].tag:
            agent_entry = provenance.image(agent, built[agent_image].image_id)
        else:
            found = engine.image_labels(agent)
            agent_entry = provenance.image(agent, found[0] if found else "")
        self._records.update_manifest(
            software=provenance.software(),
            images={
                "policy_runtime": provenance.image(built[self._policy_image].tag, built[self._policy_image].image_id),
                "environment": provenance.image(built[package.image].tag, built[package.image].image_id),
                "agent": agent_entry,
            },
            benchmark_package=provenance.benchmark_package(package.distribution, package.version, package.image),
        )

    def _record_accounting(self, seconds: float) -> None:
        """Add this invocation's wall time to run.json; count Episodes and Submissions; the end time once done."""
        records = self._records
        events = records.events()
        status = SessionState.replay(budget_of(self._spec), [event.to_json() for event in events]).status()
        exits = [e for e in events if isinstance(e, AgentExited)]
        manifest = records.read_manifest()
        fields: dict[str, Any] = {
            "wall_seconds": round((manifest.wall_seconds or 0.0) + seconds, 3),
            "episodes_spent": status.episodes_used,
            "submissions_made": status.submissions_used,
            "agent_exit_code": exits[-1].exit_code if exits else None,
            "ended_at": provenance.utc_now() if self._phase() is Phase.DONE else None,
        }
        records.update_manifest(**fields)

    # set-up ----------------------------------------------------------------------
    def _create(self, baseline_dir: Path) -> None:
        records, spec = self._records, self._spec
        records.create(self._options.spec_text)
        self._bound_workspace()
        source = (self._options.spec_dir / spec.initial_program).resolve() if spec.initial_program else baseline_dir
        program = capture_program(source)
        program.write_to(records.root / "initial_program")
        program.write_to(records.workspace / "program")
        records.store_program(program)
        records.update_manifest(
            started_at=provenance.utc_now(), spec_dir=str(self._options.spec_dir),
            benchmark=self._benchmark_id, phase=Phase.AGENT, seed=spec.seed, initial_program_digest=program.digest,
            agent=spec.agent.kind, budget=spec.budget.model_dump(),
            seed_key_id=self._seed_key.id, seed_key_file=str(self._seed_key.path),
        )
        records.append(Created(initial_program_digest=program.digest))

    def _bound_workspace(self) -> None:
        """Mount the workspace's size-bounded file system (a root Host), with its directories."""
        records, limits = self._records, self._spec.limits
        bound = workspace_fs.WorkspaceBound(size_bytes=parse_bytes(limits.agent_workspace), files=limits.agent_workspace_files)
        try:
            bounded = bound.size_bytes > 0 and workspace_fs.mount_bounded(records.root, records.workspace, bound)
        except workspace_fs.WorkspaceFsError as exc:
            raise InfrastructureError(InfraErrorCode.WORKSPACE_UNAVAILABLE, str(exc)) from None
        for name in ("program", "analysis", "feedback"):
            make_directory(records.workspace / name, PUBLIC_DIRECTORY)
        records.update_manifest(workspace_bound={"bytes": bound.size_bytes, "files": bound.files} if bounded else None)
        if not bounded:
            why = "limits.agent_workspace is 0" if bound.size_bytes == 0 else "only a root Host can mount one"
            self._notify(RunProgress.NOTE, {"message": f"the workspace has no disk bound: {why}"})

    def _episode_pool(self, sandbox: PooledSandbox) -> list[PlannedEpisode]:
        """The hidden Episode pool (train EpisodeSpecs), planned once and kept in private/ (never mounted)."""
        path = self._records.private / "pool.json"
        episode_pool = sandbox.plan("train", keyed_seed(self._seed_key.key, self._spec.seed, "train"), self._spec.budget.pool_size)
        if not path.exists():
            write_json(path, [{"index": e.index, "payload": e.payload.decode("latin-1"), "policy_seed": e.policy_seed}
                              for e in episode_pool])
        return episode_pool

    # phases ------------------------------------------------------------------------
    def _agent_phase(self, engine: DockerEngine, host: RunHost, labels: LabelSet, image: str, sandbox: PooledSandbox,
                     lanes: int) -> TerminalReason:
        records, spec = self._records, self._spec
        events = records.events()
        used = sum(e.seconds or 0.0 for e in events if isinstance(e, AgentExited))
        remaining = spec.limits.agent_wall_clock_s - used
        if host.state.status().finished:
            return TerminalReason.FINISH_CALLED
        if remaining <= 0:
            return TerminalReason.AGENT_TIME_LIMIT
        attempt = 1 + sum(1 for e in events if isinstance(e, AgentStarted))
        token = secrets.token_urlsafe(32)
        identity = agent_container.agent_identity()
        policy = relay_policy(spec)
        relay = ModelRelay(policy, records.host / "relay.sock", records.root / "relay" / f"exchanges.{attempt}.jsonl",
                           owner_uid=identity.uid if identity else None) if policy else None
        try:
            server = serve(host, token, records.host / "api.sock", owner=(identity.uid, identity.gid) if identity else None)
        except BaseException:
            if relay is not None:
                relay.close()
            raise
        ended_cleanly = False
        try:
            plan_dir = agent_container.prepare_plan(spec, self._options.spec_dir, records, self._random_program)
            user = agent_container.hand_workspace_to_agent(records)
            container_spec = agent_container.agent_spec(
                image=_agent_image(spec, image), spec=spec, records=records,
                labels=labels, user=user, token=token, plan_dir=plan_dir, memory_bytes=parse_bytes(spec.limits.agent_memory),
                runtime=spec.sandbox.runtime, skills=self._skills,
            )
            write_json(records.agent / "invocation.json", {
                "image": container_spec.image, "argv": list(container_spec.command), "user": user, "attempt": attempt,
                "environment": sorted(container_spec.environment), "skills": [skill.to_json() for skill in self._skills],
            })
            records.append(AgentStarted(attempt=attempt))
            self._notify(RunProgress.PHASE, {"phase": Phase.AGENT.value, "attempt": attempt})
            container = engine.start(container_spec)
            try:
                def finished() -> bool:
                    return host.state.status().finished or bool(relay and relay.counters.limit_reached)

                exit_status = agent_container.wait_for_agent(engine, container, remaining, finished)
                host.state.close()  # from here on Submit and Finish are refused
                agent_container.save_agent_logs(engine, container, records, attempt)
            finally:
                engine.remove(container)
            ended_cleanly = True
        finally:
            self._settle_submissions(host, sandbox, lanes, patient=ended_cleanly)
            server.stop(grace=STOP_GRACE_S).wait(STOP_GRACE_S + 5)
            if relay is not None:
                relay.close()
                self._record_relay(relay)
        records.append(AgentExited(exit_code=exit_status.exit_code, timed_out=exit_status.timed_out,
                                   seconds=round(exit_status.seconds, 3)))
        if host.state.status().finished:
            return TerminalReason.FINISH_CALLED
        if relay is not None and relay.counters.limit_reached:
            return TerminalReason.RELAY_LIMIT
        return TerminalReason.AGENT_TIME_LIMIT if exit_status.timed_out else TerminalReason.EXITED_WITHOUT_FINISH

    def _settle_submissions(self, host: RunHost, sandbox: PooledSandbox, lanes: int, *, patient: bool) -> None:
        """Close the agent's side: a Submission in flight completes in the time its Episodes may take, or is voided.

        patient False (the phase ends on an error): it is cancelled at once. Either way its last event is logged
        before this returns, and no Episode of it runs any more unless a stuck one is still ending, which the
        container pool's one-batch-at-a-time rule keeps apart from the held-out Episodes.
        """
        limits = benchmark_limits(sandbox_limits(self._spec), self._benchmark_info)
        host.state.close()  # first, so that no Submission is admitted after the one counted here
        status = host.state.status()
        flying = next((s for s in status.submissions if s.id == status.in_flight), None)
        grace = settle_timeout_s(limits, len(flying.indices), lanes) if flying and patient else 0.0
        ended = host.close(grace_s=grace, cancel=sandbox.container_pool.cancel_batch,
                           cancel_wait_s=episode_budget_s(limits) if patient else INTERRUPTED_SETTLE_S)
        if flying is not None and ended is not None:
            self._notify(RunProgress.NOTE, {"message": f"{flying.id} was in flight when the agent phase ended: {ended}"})

    def _prestart(self, sandbox: PooledSandbox, phase: Phase, candidates: int = 0) -> None:
        """Size the container pool for the Episodes that follow the start of phase, within sandbox.prestart_memory_mib.

        While the agent works the container pool holds pool_size containers and, between its Submissions' batches, also
        pre-starts the Validation and Assessment Episodes ahead (the candidates counted at their most); each phase
        then lowers the target to what still follows, and tells the pool how many Episodes that is, so that none is
        started after the last batch. A batch only ever starts what it lacks, so the agent's own Submissions come first.
        """
        spec = self._spec
        assessment = spec.assessment.episodes * (2 if spec.assessment.include_initial_program else 1)
        if phase is Phase.AGENT:
            most = spec.budget.max_submissions if spec.validation.candidates == "all_completed" else spec.validation.max_candidates
            upcoming, floor = spec.validation.episodes * most + assessment, spec.sandbox.pool_size
        elif phase is Phase.VALIDATION:
            upcoming, floor = spec.validation.episodes * candidates + assessment, 0
        else:
            upcoming, floor = assessment, 0
        target = max(floor, min(upcoming, spec.sandbox.prestart_memory_mib // IDLE_POLICY_CONTAINER_MIB))
        if phase is not Phase.AGENT:
            sandbox.container_pool.expect(upcoming)  # exactly these Episodes follow: nothing is refilled after the last
        sandbox.container_pool.resize(target)
        self._records.append(Prestart(phase=phase, target=target, ready=sandbox.container_pool.ready_count()))

    def _record_relay(self, relay: ModelRelay) -> None:
        """Add this attempt's relay counts to run.json's totals."""
        recorded = self._records.read_manifest().relay
        totals: dict[str, Any] = recorded.to_json() if recorded is not None else {}
        counts = relay.counters.to_json()
        for key in ("requests", "refused", "errors", "tokens", "request_bytes", "response_bytes", "refused_bytes",
                    "refused_connections", "unrecorded"):
            totals[key] = totals.get(key, 0) + counts[key]
        totals["limit_reached"] = counts["limit_reached"] or totals.get("limit_reached")
        self._records.update_manifest(relay=totals)

    def _candidates(self, state: SessionState, direction: str) -> tuple[tuple[str, ...], str]:
        status = state.status()
        if self._spec.validation.candidates == "all_completed":
            return every_completed(status.submissions), "all completed Submissions, ties to the latest"
        if status.finished:
            return status.candidates, "agent"
        chosen = fallback_candidates(status.submissions, state.budget.max_candidates, direction)
        return chosen, "fallback: best train scores"

    def _validation_phase(self, sandbox: PooledSandbox, state: SessionState, direction: str) -> None:
        records, spec = self._records, self._spec
        self._notify(RunProgress.PHASE, {"phase": Phase.VALIDATION.value})
        candidates, rule = self._candidates(state, direction)
        if not candidates:
            write_json(records.root / "validation.json", ValidationReport.model_validate(
                {"schema": schema.VALIDATION, "candidates": [], "rule": rule, "selected": None}).to_json())
            records.update_manifest(validation={"candidates": [], "selected": None}, final=None, assessment=None,
                                    terminal_reason=records.read_manifest().terminal_reason or TerminalReason.NO_SUBMISSIONS)
            records.append(ValidationDone(selected=None))  # nothing selected: the Run is done here
            records.update_manifest(phase=Phase.DONE)
            return
        self._prestart(sandbox, Phase.VALIDATION, len(candidates))
        episodes = sandbox.plan("validation", keyed_seed(self._seed_key.key, spec.seed, "validation"), spec.validation.episodes)
        digests = {s.id: s.program_digest for s in state.status().submissions}
        programs = [self._stored_program(digests[submission_id]) for submission_id in candidates]
        # Every candidate on the same Episodes, all in one concurrent batch.
        feedbacks = evaluate_programs(sandbox, programs, episodes)
        results, table = [], []
        for order, (submission_id, program, feedback) in enumerate(zip(candidates, programs, feedbacks, strict=True)):
            failures = sum(1 for e in feedback.episodes if e.failure is not None)
            results.append(CandidateResult(submission_id=submission_id, order=order, score=feedback.score, policy_failures=failures))
            table.append({"submission_id": submission_id, "program_digest": program.digest, "score": feedback.score,
                          "policy_failures": failures, "feedback": feedback_json(feedback, program.digest)})
            self._notify(RunProgress.VALIDATED, {"id": submission_id, "score": feedback.score})
        best = select_candidate(results, direction, failures_break_ties=self._spec.validation.candidates == "agent")
        report = {"schema": schema.VALIDATION, "candidates": list(candidates), "rule": rule, "episodes": spec.validation.episodes,
                  "selected": best.submission_id, "results": table, "parameters_digest": self._parameters_digest}
        write_json(records.root / "validation.json", ValidationReport.model_validate(report).to_json())
        records.update_manifest(
            validation={"candidates": list(candidates), "rule": rule, "selected": best.submission_id,
                        "scores": {r.submission_id: r.score for r in results}},
            final={"submission_id": best.submission_id, "program_digest": digests[best.submission_id]},
        )
        records.append(ValidationDone(selected=best.submission_id))
        records.update_manifest(phase=Phase.ASSESSMENT)

    def _stored_program(self, digest: str) -> Program:
        return capture_program(self._records.root / "programs" / digest.removeprefix("sha256:"))

    def _assessment_phase(self, sandbox: PooledSandbox) -> None:
        records, spec = self._records, self._spec
        self._notify(RunProgress.PHASE, {"phase": Phase.ASSESSMENT.value})
        self._prestart(sandbox, Phase.ASSESSMENT)
        final = records.read_manifest().final
        if final is None or final.submission_id is None or final.program_digest is None:
            raise InfrastructureError(InfraErrorCode.RUNNER_FAILED, "run.json lost the Program Validation selected")
        program = self._stored_program(final.program_digest)
        initial = capture_program(records.root / "initial_program")
        episodes = sandbox.plan("test", keyed_seed(self._seed_key.key, spec.seed, "assessment"), spec.assessment.episodes)
        # The starting Program on the very same held-out Episodes is the reference the Run improved on.
        programs = [program, initial] if spec.assessment.include_initial_program else [program]
        feedback, *reference = evaluate_programs(sandbox, programs, episodes)
        document = feedback_json(feedback, program.digest)
        report: dict[str, Any] = {**document, "schema": schema.ASSESSMENT, "submission_id": final.submission_id,
                                  "parameters_digest": self._parameters_digest}
        summary: dict[str, Any] = {"score": feedback.score, "episodes": spec.assessment.episodes,
                                   "policy_failures": sum(1 for e in feedback.episodes if e.failure)}
        if reference:
            report["initial_program"] = feedback_json(reference[0], initial.digest)
            summary["initial_program_score"] = reference[0].score
        write_json(records.root / "assessment.json", AssessmentReport.model_validate(report).to_json())
        records.update_manifest(assessment=summary,
                                final={**final.to_json(), "is_initial_program": final.program_digest == initial.digest})
        records.append(AssessmentDone(score=feedback.score))
        records.update_manifest(phase=Phase.DONE)
        self._notify(RunProgress.ASSESSED, {"score": feedback.score})
        if not records.read_manifest().terminal_reason:
            raise InfrastructureError(InfraErrorCode.RUNNER_FAILED, "run.json lost its terminal reason")
        shutil.rmtree(records.host, ignore_errors=True)
        records.host.mkdir()
