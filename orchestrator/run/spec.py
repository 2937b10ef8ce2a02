"""The Run spec file (YAML), validated at the edge with pydantic."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, Union
from urllib.parse import urlsplit

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Agent(_Strict):
    """What every agent kind takes."""

    skills: list[str] = Field(
        default_factory=list, max_length=16,
        description="Agent skills: SKILL.md bundle directories on the Host, relative to the spec file. Each is copied at Run "
        "start into the run directory's content-addressed store (skills/<digest>/, its digest recorded in run.json), "
        "mounted read-only at /epg/skills/<directory name> (and linked where the coding-agent CLI looks for skills) "
        "and listed in the task text.",
    )

    @field_validator("skills")
    @classmethod
    def _distinct_skills(cls, skills: list[str]) -> list[str]:
        names = [Path(path).name for path in skills]
        if any(not path.strip() for path in skills):
            raise ValueError("a skill is a directory path, not empty")
        if len(set(names)) != len(names):
            raise ValueError("two skills have the same directory name")
        return skills


class ScriptedStep(_Strict):
    program: str = Field(description="Program directory to submit, relative to the spec file.")
    episodes: str = Field(description="Index selector, e.g. '0:8,12'.")


class ScriptedAgent(_Agent):
    kind: Literal["scripted"]
    steps: list[ScriptedStep] = Field(min_length=1, description="Submissions to make, in order.")
    finish: Union[list[str], Literal["all", "none"]] = Field(
        default="all", description="Candidate Submission ids, 'all' (every Submission, up to max_candidates) or 'none' (stop without finishing)."
    )


class HillClimbAgent(_Agent):
    kind: Literal["hill-climb"]
    episodes_per_submission: int = Field(default=8, ge=1, description="Pool indices 0..K-1 evaluated by every Submission (paired comparison).")
    step_size: float = Field(default=0.5, gt=0, description="Initial standard deviation of the Gaussian perturbation.")
    seed: int = Field(default=0, ge=0, description="Seed of the agent's own perturbations.")
    candidates: int = Field(default=3, ge=1, description="How many of its best Submissions it hands back.")


class RandomAgent(_Agent):
    kind: Literal["random"]
    episodes_per_submission: int = Field(
        default=1, ge=1,
        description="Pool indices 0..K-1 its one Submission is scored on (the tables report the Assessment, not this "
        "score); under finish: require_exhaustion it spends the whole budget instead, in as few Submissions as it allows.",
    )


class CommandAgent(_Agent):
    kind: Literal["command"]
    image: str = Field(description="Agent image (must provide epg-session or speak the Host API); 'agent-base' is the built one.")
    argv: list[str] = Field(min_length=1)
    environment: dict[str, str] = Field(default_factory=dict)


class CodexAgent(_Agent):
    kind: Literal["codex"]
    model: str = Field(description="Model name passed to the Codex CLI.")
    effort: Literal["minimal", "low", "medium", "high"] = Field(default="medium", description="model_reasoning_effort.")


class ClaudeCodeAgent(_Agent):
    kind: Literal["claude-code"]
    model: str = Field(description="Model name passed to Claude Code.")
    effort: Literal["low", "medium", "high"] | None = Field(default=None, description="Reasoning effort (MAX_THINKING_TOKENS preset); none: the CLI's default.")


class GeminiAgent(_Agent):
    kind: Literal["gemini"]
    model: str = Field(description="Model name passed to Gemini CLI, e.g. gemini-2.5-pro.")


class QwenCodeAgent(_Agent):
    kind: Literal["qwen-code"]
    model: str = Field(description="Model name passed to Qwen Code (its OpenAI-compatible provider), e.g. qwen3-coder-plus.")


class OpencodeAgent(_Agent):
    kind: Literal["opencode"]
    model: str = Field(description="Model name opencode asks for from its OpenAI-compatible provider (the relay), e.g. gpt-5.")


class AiderAgent(_Agent):
    kind: Literal["aider"]
    model: str = Field(description="Model name Aider asks for from the OpenAI Chat Completions API (the relay), e.g. gpt-5.")


class MiniSweAgent(_Agent):
    kind: Literal["mini-swe-agent"]
    model: str = Field(description="Model name mini-SWE-agent asks for from the OpenAI Chat Completions API (the relay).")


class ClineAgent(_Agent):
    kind: Literal["cline"]
    model: str = Field(description="Model name Cline asks for from its OpenAI-compatible provider (the relay).")


class RelaySpec(_Strict):
    """How the model relay reaches the provider. Unset fields take the agent kind's defaults (or the profile's, or the login's).

    Where a credential may go is not the spec's to decide alone: `run.relay_setup` refuses a credential bound for
    anywhere but its documented host unless the person running the spec granted it on the command line.
    """

    # (credential, host) pairs granted on the command line (`relay_setup.with_grants`); never read from a file.
    _grants: tuple[tuple[str, str], ...] = PrivateAttr(default=())

    profile: Literal["openai-compatible"] | None = Field(
        default=None,
        description="openai-compatible: for any client of the OpenAI Chat Completions or Responses API (a command agent, "
        "or codex against another server): forwards /v1/chat/completions, /v1/responses and /v1/models to upstream, which "
        "it needs; a model server on the Host's own loopback works (the relay runs on the Host). A credential is sent "
        "only when credential_env names one.",
    )
    upstream: str | None = Field(
        default=None, description="Provider base URL, e.g. https://api.openai.com. A credential goes to a host other "
        "than its provider's only with --allow-credential NAME@HOST on the command line.")
    credential_env: str | None = Field(
        default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="Host environment variable holding the credential. A variable other than a provider's own key "
        "(OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY, DASHSCOPE_API_KEY) is sent only with --allow-credential "
        "VARIABLE@HOST on the command line.")
    login: Literal["codex", "claude"] | None = Field(
        default=None,
        description="Use the CLI's subscription login on the Host instead of a key: codex (ChatGPT, ~/.codex/auth.json, "
        "refreshed by the relay when it expires) or claude (Claude, ~/.claude/.credentials.json). Read by the Host's "
        "relay only, never mounted into the container.",
    )
    login_file: str | None = Field(default=None, description="The login's file, if not the CLI's own (absolute or ~/...).")
    refresh_url: str | None = Field(default=None, description="OAuth token endpoint the codex login is refreshed at "
                                    "(default https://auth.openai.com/oauth/token; another host needs "
                                    "--allow-credential codex-login@HOST on the command line).")
    allow_paths: list[str] | None = Field(
        default=None, description="Request paths the relay forwards; one ending in / or * allows every path it begins.")
    max_requests: int | None = Field(default=None, ge=1)
    max_tokens: int | None = Field(default=None, ge=1)
    timeout_s: float = Field(
        default=300.0, gt=0,
        description="The longest the upstream may keep the relay waiting (to connect, for its answer to begin, between "
        "two pieces of it); then the agent gets a 504, or its stream ends, and the error is recorded.",
    )

    @property
    def granted(self) -> tuple[tuple[str, str], ...]:
        """The (credential, host) pairs the person running the spec granted on the command line."""
        return self._grants

    @field_validator("upstream", "refresh_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is None:
            return value
        scheme, separator, _ = value.partition("://")
        if not separator or scheme not in ("http", "https"):
            raise ValueError("must be an http:// or https:// URL")
        if any(c in value for c in "@\\?#") or any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in value):
            raise ValueError("must be a plain URL: a host, an optional port and path, no user, query, fragment or backslash")
        parts = urlsplit(value)
        if not parts.hostname or parts.port == 0:  # .port raises ValueError for a port that is not one
            raise ValueError("must name a host (and, if any, a port from 1 to 65535)")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> RelaySpec:
        if self.login is not None and self.credential_env is not None:
            raise ValueError("login and credential_env are two credentials: give one")
        if self.login is not None and self.profile is not None:
            raise ValueError("a login has its own upstream and paths: give login or profile, not both")
        if self.login is None and (self.login_file is not None or self.refresh_url is not None):
            raise ValueError("login_file and refresh_url need a login")
        if self.refresh_url is not None and self.login != "codex":
            raise ValueError("refresh_url: only the codex login is refreshed by the relay")
        if self.login_file is not None and not (self.login_file.startswith("~") or Path(self.login_file).is_absolute()):
            raise ValueError("login_file must be an absolute path or start with ~")
        return self


_AGENT_KINDS = {"scripted", "hill-climb", "random", "command", "codex", "claude-code", "gemini", "qwen-code", "opencode", "aider",
                "mini-swe-agent", "cline"}
AgentSpec = Annotated[
    Union[ScriptedAgent, HillClimbAgent, RandomAgent, CommandAgent, CodexAgent, ClaudeCodeAgent, GeminiAgent, QwenCodeAgent,
          OpencodeAgent, AiderAgent, MiniSweAgent, ClineAgent],
    Field(discriminator="kind"),
]


class BudgetSpec(_Strict):
    episodes: int = Field(default=64, ge=1, description="Total Episode units the agent may spend.")
    max_submissions: int = Field(default=16, ge=1)
    pool_size: int = Field(default=32, ge=1, description="Train Episodes in the hidden pool, addressed by index.")
    max_episodes_per_submission: int | None = Field(default=None, ge=1)
    finish: Literal["allow_early", "require_exhaustion"] = "allow_early"


class ValidationSpec(_Strict):
    episodes: int = Field(default=16, ge=1)
    max_candidates: int = Field(default=4, ge=1, description="How many candidates the agent may name when it finishes.")
    candidates: Literal["agent", "all_completed"] = Field(
        default="agent",
        description="agent: validate the candidates the agent names (or, if it stops without finishing, its max_candidates best "
        "by train score); all_completed: validate every completed Submission, the best on Validation winning, ties to the "
        "latest (the published Core16 protocol).",
    )


class AssessmentSpec(_Strict):
    episodes: int = Field(default=32, ge=1)
    include_initial_program: bool = Field(default=True, description="Also assess the starting Program on the same Episodes, as a reference.")


_SIZE = r"^\d+(\.\d+)?\s*[kKmMgG]?i?[bB]?$"


class LimitsSpec(_Strict):
    step_deadline_s: float = Field(default=1.0, gt=0)
    episode_deadline_s: float = Field(default=300.0, gt=0)
    startup_deadline_s: float = Field(default=30.0, gt=0)
    agent_wall_clock_s: float = Field(default=3600.0, gt=0)
    policy_memory: str = Field(default="512m", pattern=_SIZE)
    policy_cpus: float = Field(default=1.0, gt=0)
    policy_pids: int = Field(default=64, ge=8)
    agent_memory: str = Field(default="2g", pattern=_SIZE)
    policy_tmp: str = Field(default="64m", pattern=_SIZE, description="Size of the policy container's /tmp.")
    agent_tmp: str = Field(default="256m", pattern=_SIZE, description="Size of the agent container's /tmp.")
    shm: str = Field(default="16m", pattern=_SIZE, description="Size of /dev/shm in the policy and agent containers.")
    agent_workspace: str = Field(
        default="1g", pattern=_SIZE,
        description="Disk the agent may fill in its workspace (program/ and analysis/ together); enforced when the Host runs as root; 0: no bound.",
    )
    agent_workspace_files: int = Field(default=65536, ge=256, description="Files and directories the workspace may hold in all.")


class KubernetesSpec(_Strict):
    """Where the Episodes run when sandbox.backend is kubernetes (ARCHITECTURE.md, "Episodes on Kubernetes")."""

    context: str = Field(default="", description="kubeconfig context ($KUBECONFIG or ~/.kube/config); empty: the current one.")
    namespace: str = Field(default="default", pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$",
                           description="Namespace of the Episode Pods and their NetworkPolicy.")
    registry_prefix: str = Field(
        default="", pattern=r"^([A-Za-z0-9.-]+(:[0-9]{1,5})?)?$",
        description="Registry the cluster pulls from (HOST[:PORT]; `images push --registry` puts the images there); "
        "empty: the nodes already hold the local tags.",
    )
    runtime_class_name: str = Field(default="", description="RuntimeClass of the Episode Pods, e.g. gvisor; empty: the cluster's default.")


class SandboxSpec(_Strict):
    backend: Literal["docker", "kubernetes"] = Field(
        default="docker", description="Where Episodes run: the local Docker engine, or a Kubernetes cluster (sandbox.kubernetes)."
    )
    kubernetes: KubernetesSpec = KubernetesSpec()
    concurrency: int = Field(default=0, ge=0, description="Episodes run at once; 0: one per CPU.")
    pool_size: int = Field(default=16, ge=0, description="Policy containers kept pre-started while the agent thinks (each used once).")
    prestart_memory_mib: int = Field(
        default=2048, ge=0,
        description="Memory for policy containers pre-started while the agent works, for the Validation and Assessment "
        "Episodes that follow: as many as that many MiB hold at about 18 MiB an idle container, at most those Episodes "
        "(0: none beyond pool_size). Each is still used once.",
    )
    runtime: Literal["runc", "runsc"] = Field(
        default="runc",
        description="OCI runtime of the policy and agent containers: runc, or runsc (gVisor: a user-space kernel "
        "between them and the host's; install and register it with scripts/ensure-docker.sh).",
    )
    isolation: Literal["container", "forked"] = Field(
        default="container",
        description="How each Episode is isolated: container (a policy container of its own), or forked (a sandbox of fresh "
        "namespaces forked in its lane's hardened container from a runtime that has already imported everything; "
        "Docker backend only; ARCHITECTURE.md, \"Forked Episode sandboxes\").",
    )

    @model_validator(mode="after")
    def _consistent(self) -> SandboxSpec:
        if self.isolation == "forked" and self.backend != "docker":
            raise ValueError("sandbox.isolation forked runs on the Docker backend only")
        return self


class RecordsSpec(_Strict):
    bulk_artifacts_bytes: int = Field(
        default=1 << 30, ge=0,
        description="Bytes of bulk artifacts (replays, frames: what a Benchmark marks bulk) a Run keeps in all; past it the "
        "oldest are evicted, their files removed and their entries in record.json marked evicted. Permanent artifacts are never evicted.",
    )


class RunSpec(_Strict):
    """A Run: which benchmark, which agent, what budget, where the records go."""

    benchmark: str
    agent: AgentSpec
    initial_program: str | None = Field(default=None, description="Starting Program; default: the benchmark's baseline.")
    budget: BudgetSpec = BudgetSpec()
    validation: ValidationSpec = ValidationSpec()
    assessment: AssessmentSpec = AssessmentSpec()
    seed: int = Field(default=0, ge=0)
    seed_key_file: str | None = Field(
        default=None,
        description="File holding the Host's secret seed key (hex), relative to the spec file; it must exist. "
        "Default: $XDG_DATA_HOME/epg-orchestrator/seed.key (else ~/.local/share/...), generated on first use. "
        "Runs with the same seed and key have the same hidden Episodes.",
    )
    limits: LimitsSpec = LimitsSpec()
    sandbox: SandboxSpec = SandboxSpec()
    relay: RelaySpec = RelaySpec()
    records: RecordsSpec = RecordsSpec()
    output: str | None = Field(default=None, description="Run directory; default runs/<benchmark>-<time>.")

    @model_validator(mode="after")
    def _consistent(self) -> RunSpec:
        per = self.budget.max_episodes_per_submission
        if per is not None and per > self.budget.episodes:
            raise ValueError("budget.max_episodes_per_submission exceeds budget.episodes")
        return self


class SpecError(Exception):
    """The spec file is unreadable or invalid. `problems` lists "field.path: reason" lines."""

    def __init__(self, path: Path, problems: list[str]) -> None:
        super().__init__(f"{path}: " + "; ".join(problems))
        self.path = path
        self.problems = problems


def load_spec(path: Path) -> tuple[RunSpec, str]:
    """Return the validated spec and its text as given. Raises SpecError."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise SpecError(path, [f"cannot read: {exc.strerror}"]) from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SpecError(path, [yaml_problem(exc)]) from None
    if not isinstance(data, dict):
        raise SpecError(path, ["the spec must be a mapping of keys to values"])
    try:
        return RunSpec.model_validate(data), text
    except ValidationError as exc:
        raise SpecError(path, [_problem(error) for error in exc.errors()]) from exc


def yaml_problem(exc: yaml.YAMLError) -> str:
    """One line for a YAML syntax error: `line:column: reason` (1-based, where the parser gave up)."""
    mark = getattr(exc, "problem_mark", None)
    reason = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    context = getattr(exc, "context", None)
    if context:
        reason = f"{reason} ({context})"
    return f"{mark.line + 1}:{mark.column + 1}: {reason}" if mark is not None else f"not valid YAML: {reason}"


def _problem(error: Mapping[str, Any]) -> str:
    """One line for one of pydantic's errors (a `pydantic_core.ErrorDetails`): `location: reason`."""
    parts = [str(part) for part in error["loc"]]
    if parts[:1] == ["agent"] and len(parts) > 1 and parts[1] in _AGENT_KINDS:
        parts.pop(1)  # the union's tag, not a key the user wrote
    location = ".".join(parts)
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        message = "unknown key"
    return f"{location or '(top level)'}: {message}"


def json_schema() -> dict[str, Any]:
    return RunSpec.model_json_schema()
