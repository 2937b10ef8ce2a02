"""Sandbox opening: the one function that opens a sandbox of either backend (`open_sandbox`), the images a
Benchmark's sandbox runs, and what a command of one evaluation (`evaluate`, `env test`, replay) opens.

Every caller goes through `open_sandbox`: the Run driver, `evaluate`, `env test` (`envcheck`), replay
(`reports.rerun`) and the pytest plugin, so the limits, tuning and labels reach either backend the same way.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

from orchestrator.backends.engine import DockerEngine
from orchestrator.backends.kubernetes.manifests import ClusterSettings, ClusterTarget, image_reference
from orchestrator.backends.labels import LabelSet, sandbox_labels
from orchestrator.backends.sandbox import DockerSandbox
from orchestrator.backends.settings import SandboxImages, SandboxLimits, SandboxTuning
from orchestrator.images.builder import ImageBuilder
from orchestrator.images.catalogue import EnvironmentPackage, resolve_benchmark
from orchestrator.images.recipes import policy_image_of
from orchestrator.kernel.infrastructure import InfraErrorCode, InfrastructureError
from orchestrator.kernel.ports import PooledSandbox
from orchestrator.orphans import reap_cluster_orphans, reap_orphans
from orchestrator.records import provenance

if TYPE_CHECKING:
    from orchestrator.backends.kubernetes.sandbox import KubernetesSandbox

Progress = Callable[[str], None]


def _quiet(message: str) -> None:
    """A progress callback that says nothing."""


@dataclass(frozen=True, slots=True, kw_only=True)
class KubernetesOptions:
    """Episodes on a cluster: which one, the registry its nodes pull from, the Pods' RuntimeClass."""

    target: ClusterTarget = ClusterTarget()
    registry_prefix: str = ""
    runtime_class_name: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class SandboxSetup:
    """How a sandbox is opened, whatever its backend: the policy's limits, the tuning, the sandbox's labels, and the
    cluster (None: the local Docker engine)."""

    labels: LabelSet
    limits: SandboxLimits = SandboxLimits()
    tuning: SandboxTuning = SandboxTuning()
    kubernetes: KubernetesOptions | None = None


@contextmanager
def open_sandbox(engine: DockerEngine, images: SandboxImages, setup: SandboxSetup,
                 progress: Progress = _quiet) -> Iterator[PooledSandbox]:
    """Yield the started sandbox of the chosen backend running images: the Docker engine's, or a cluster's when
    setup.kubernetes is set (its orphans reaped first, images named under its registry prefix). Leaving the block
    closes it and reaps everything labelled with its sandbox id.

    Raises InfrastructureError (engine, cluster, runner, images).
    """
    sandbox: DockerSandbox | KubernetesSandbox
    if setup.kubernetes is not None and setup.tuning.isolation != "container":
        raise InfrastructureError(InfraErrorCode.ENGINE_UNAVAILABLE,
                                  f"{setup.tuning.isolation} isolation runs on the Docker backend only; choose container isolation on a cluster")
    if setup.kubernetes is None:
        sandbox = DockerSandbox(engine, images, setup.limits, setup.labels, tuning=setup.tuning)
    else:
        sandbox = _cluster_sandbox(images, setup, setup.kubernetes, progress)
    with sandbox:
        yield sandbox


def _cluster_sandbox(images: SandboxImages, setup: SandboxSetup, kubernetes: KubernetesOptions, progress: Progress) -> KubernetesSandbox:
    """The (not yet entered) Kubernetes sandbox of setup. Raises InfrastructureError when the cluster does not answer."""
    # Imported here: the kubernetes client costs about a second of start-up that no Docker command should pay.
    from orchestrator.backends.kubernetes.cluster import Cluster
    from orchestrator.backends.kubernetes.sandbox import KubernetesSandbox

    cluster = Cluster.connect(kubernetes.target)
    reaped = reap_cluster_orphans(cluster)
    if reaped.total:
        progress(f"reaped {reaped.total} cluster objects of dead orchestrator processes")
    pod_images = SandboxImages(environment=image_reference(kubernetes.registry_prefix, images.environment),
                               policy_runtime=image_reference(kubernetes.registry_prefix, images.policy_runtime),
                               benchmark_entry=images.benchmark_entry)
    settings = ClusterSettings(namespace=kubernetes.target.namespace, runtime_class_name=kubernetes.runtime_class_name)
    return KubernetesSandbox(cluster, pod_images, setup.limits, setup.labels, tuning=setup.tuning, settings=settings)


def connect_engine(progress: Progress = _quiet) -> DockerEngine:
    """Return the connected Docker engine, after reaping what dead orchestrator processes of this host left on it.

    Raises InfrastructureError(ENGINE_UNAVAILABLE) when no engine answers.
    """
    engine = DockerEngine.connect()
    reaped = reap_orphans(engine)
    if reaped.total:
        progress(f"reaped {reaped.total} leftovers of dead orchestrator processes")
    return engine


@dataclass(frozen=True, slots=True, kw_only=True)
class SandboxOptions:
    """A sandbox for one Benchmark, as a command of one evaluation asks for it (`open_benchmark_sandbox`).

    environment_image: an explicit environment image (repo:tag or id) and benchmark_entry, the factory entry of
    benchmark inside it; when set, the catalogue is not asked and only the policy runtime image is built if needed.
    """

    benchmark: str
    limits: SandboxLimits = SandboxLimits()
    tuning: SandboxTuning = SandboxTuning()
    scope: str = ""
    base: str = "auto"
    environments: list[Path] | None = field(default=None)
    environment_image: str = ""
    benchmark_entry: str = ""
    kubernetes: KubernetesOptions | None = None  # None: the local Docker engine


def benchmark_images(builder: ImageBuilder, benchmark: str, *, environment_image: str = "", benchmark_entry: str = "") -> SandboxImages:
    """Return the images a sandbox of benchmark runs, built if needed: the catalogue's environment image, or
    environment_image as it is (benchmark_entry inside it), and the policy runtime of its Python (policy-runtime, or
    policy-runtime-py313 for a Python 3.13 package such as an EvoPolicyGym one).

    Raises InfrastructureError (a build) and CatalogueError (an unknown benchmark).
    """
    if environment_image:
        (policy_runtime,) = [r.tag for r in builder.ensure([builder.policy_image_for(environment_image)])]
        return SandboxImages(environment=environment_image, policy_runtime=policy_runtime, benchmark_entry=benchmark_entry)
    package, _benchmark_id, entry = resolve_benchmark(benchmark, builder.packages())
    policy_image = policy_image_of(package)  # the policy runtime of the package's Python
    results = {r.name: r.tag for r in builder.ensure([policy_image, package.image])}
    return SandboxImages(environment=results[package.image], policy_runtime=results[policy_image], benchmark_entry=entry)


@contextmanager
def open_benchmark_sandbox(options: SandboxOptions, progress: Progress = _quiet) -> Iterator[PooledSandbox]:
    """Connect to the engine, make the images the benchmark needs, and yield a started sandbox (`open_sandbox`)
    with a new sandbox's labels under options.scope.

    Raises InfrastructureError (engine, images, runner) and CatalogueError (unknown benchmark).
    """
    engine = connect_engine(progress)
    builder = ImageBuilder(engine.client, base=options.base, environments=options.environments, progress=progress)
    images = benchmark_images(builder, options.benchmark, environment_image=options.environment_image,
                              benchmark_entry=options.benchmark_entry)
    setup = SandboxSetup(labels=sandbox_labels(options.scope), limits=options.limits, tuning=options.tuning,
                         kubernetes=options.kubernetes)
    with open_sandbox(engine, images, setup, progress) as sandbox:
        yield sandbox


def sandbox_provenance(sandbox: PooledSandbox, package: EnvironmentPackage | None) -> dict[str, object]:
    """Return the provenance fields of an evaluation on sandbox: software, images (tag and id), the Benchmark package."""
    ids = sandbox.image_ids()
    images = {
        "policy_runtime": provenance.image(sandbox.images.policy_runtime, ids["policy_runtime"]),
        "environment": provenance.image(sandbox.images.environment, ids["environment"]),
    }
    fields: dict[str, object] = {"software": provenance.software(), "images": images}
    if package is not None:
        fields["benchmark_package"] = provenance.benchmark_package(package.distribution, package.version, package.image)
    return fields
