"""The interfaces the kernel and the Host need from a sandbox of any backend, and the values they exchange.

`EpisodeSandbox` is what the kernel evaluates with; `PooledSandbox` adds what the Host's commands use of an opened
sandbox (the Run driver, `evaluate`, `env test`, replay, the pytest plugin): its container pool, the pre-started
policy runtimes (never the Run's hidden Episode pool), and the images it runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from orchestrator.kernel.jsonable import jsonable
from orchestrator.kernel.outcomes import ArtifactDetails, EpisodeOutcome
from orchestrator.kernel.program import Program


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchmarkInfo:
    """The public spec of a Benchmark as its environment image describes it."""

    id: str
    description: str
    observation_space: Any
    action_space: Any
    horizon: int
    primary_metric: str
    direction: str
    parameters: Any
    failure_return: float
    readme: str = ""
    # The Benchmark's own time limits in seconds (0: the Host's defaults apply; see `per_benchmark_limits`).
    step_seconds: float = 0.0
    episode_seconds: float = 0.0
    # "sha256:<hex>" of the canonical encoding of parameters (`epg_sdk.benchmark.parameters_digest`), bound into every
    # result of this Benchmark.
    parameters_digest: str = ""

    def public_json(self) -> dict[str, Any]:
        """The spec as JSON-ready data (arrays as lists, bytes as base64, NaN as None), without the readme."""
        fields = {
            "id": self.id,
            "description": self.description,
            "observation_space": self.observation_space,
            "action_space": self.action_space,
            "horizon": self.horizon,
            "primary_metric": self.primary_metric,
            "direction": self.direction,
            "parameters": self.parameters,
            "failure_return": self.failure_return,
        }
        return {name: jsonable(value) for name, value in fields.items()}


@dataclass(frozen=True, slots=True, kw_only=True)
class PlannedEpisode:
    """A hidden EpisodeSpec: the payload never leaves the Host and the runner."""

    split: str
    index: int
    payload: bytes = field(repr=False)
    policy_seed: int = field(repr=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class SubmitReceipt:
    """What the agent learns of its completed Submission, with the budget exactly as it left it."""

    submission_id: str
    program_digest: str
    score: float
    policy_failures: int
    feedback_path: str
    episodes_used: int
    episodes_left: int
    submissions_left: int


@dataclass(frozen=True, slots=True, kw_only=True)
class EpisodeJob:
    """One Episode of one Program."""

    episode: PlannedEpisode
    program: Program


@dataclass(frozen=True, slots=True, kw_only=True)
class EvaluationFeedback:
    """The Benchmark's score, values and artifacts, plus what the runtime saw per Episode."""

    score: float
    values: dict[str, Any]
    artifacts: dict[str, bytes]
    episodes: tuple[EpisodeOutcome, ...]
    # Media type and retention of artifacts by name (a name without an entry: guessed from the name, permanent).
    artifact_details: dict[str, ArtifactDetails] = field(default_factory=dict)
    # The indices of the Episodes whose evidence did not reach the Benchmark's Feedback (over the Host's bound).
    evidence_dropped: tuple[int, ...] = ()


class EpisodeSandbox(Protocol):
    """Runs Episodes of one Benchmark, each in a fresh policy runtime.

    Implementations raise InfrastructureError for faults of the trusted side
    and never for anything the policy does.
    """

    def describe(self) -> BenchmarkInfo:
        """The Benchmark's public spec."""

    def plan(self, split: str, seed: int, count: int) -> list[PlannedEpisode]:
        """Plan count Episodes of split under seed."""

    def run_episodes(
        self, jobs: Sequence[EpisodeJob], on_episode: Callable[[EpisodeOutcome], None] | None = None
    ) -> list[EpisodeOutcome]:
        """Run every job, each in a fresh runtime, possibly concurrently; return the outcomes in job order.

        on_episode is called (from any thread) as each Episode ends.
        """

    def feedback(self, outcomes: list[EpisodeOutcome]) -> EvaluationFeedback:
        """Build the Feedback of finished Episodes, in the given order."""


@runtime_checkable
class ContainerPoolControl(Protocol):
    """What the Host steers of a sandbox's container pool: the single-use policy runtimes it pre-starts.

    Not the Episode pool (the hidden train EpisodeSpecs a Run's agent addresses by index).
    """

    def resize(self, size: int) -> None:
        """Keep size containers ready between batches from now on."""

    def expect(self, episodes: int) -> None:
        """From now on start no more containers than the episodes still to come."""

    def ready_count(self) -> int:
        """The number of containers ready now."""

    def cancel_batch(self) -> bool:
        """Make the running batch start no further Episode; return whether a batch was running."""


class SandboxImageNames(Protocol):
    """The images a sandbox runs, as the engine or the cluster names them."""

    @property
    def environment(self) -> str: ...

    @property
    def policy_runtime(self) -> str: ...


@runtime_checkable
class PooledSandbox(EpisodeSandbox, Protocol):
    """An opened sandbox of any backend, as the Host's commands use it: Episodes, and the container pool and images.

    Both DockerSandbox and KubernetesSandbox implement it; `orchestrator.sandbox_opening.open_sandbox` yields one.
    """

    @property
    def container_pool(self) -> ContainerPoolControl:
        """The pre-started policy runtimes (only while the sandbox is open)."""

    @property
    def images(self) -> SandboxImageNames:
        """The environment and policy-runtime images the sandbox runs."""

    def image_ids(self) -> dict[str, str]:
        """The image ids of the environment and policy-runtime images ("" where not known)."""
