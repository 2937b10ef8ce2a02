"""Composition: wires the engine, the image builder, the catalogue and the sandbox together."""

from __future__ import annotations

import os
import secrets
import socket
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, ContextManager, Iterator

from orchestrator.backends.engine import DockerEngine, ReapReport
from orchestrator.backends.kubernetes.manifests import ClusterSettings, ClusterTarget, image_reference, label_selector
from orchestrator.backends.labels import OWNER, LabelSet, owner_id, selector
from orchestrator.backends.sandbox import DockerSandbox
from orchestrator.backends.settings import SandboxImages, SandboxLimits, SandboxTuning
from orchestrator.images.builder import ImageBuilder
from orchestrator.images.catalogue import EnvironmentPackage, resolve_benchmark
from orchestrator.records import provenance

if TYPE_CHECKING:
    from orchestrator.backends.kubernetes.cluster import Cluster, ClusterReapReport
    from orchestrator.backends.kubernetes.sandbox import KubernetesSandbox

Progress = Callable[[str], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class KubernetesOptions:
    """Episodes on a cluster: which one, the registry its nodes pull from, the Pods' RuntimeClass."""

    target: ClusterTarget = ClusterTarget()
    registry_prefix: str = ""
    runtime_class_name: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class SandboxOptions:
    benchmark: str
    limits: SandboxLimits = SandboxLimits()
    tuning: SandboxTuning = SandboxTuning()
    scope: str = ""
    base: str = "auto"
    environments: list[Path] | None = field(default=None)
    # An explicit environment image (repo:tag or id) and the factory entry of benchmark inside it;
    # when set, the catalogue is not asked and only the policy runtime image is built if needed.
    environment_image: str = ""
    benchmark_entry: str = ""
    kubernetes: KubernetesOptions | None = None  # None: the local Docker engine


def owner_is_dead(owner: str) -> bool:
    """True when owner (hostname:pid) names a process of this host that no longer exists."""
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def reap_orphans(engine: DockerEngine) -> ReapReport:
    """Reap what orchestrator processes of this host left behind when they died."""
    total = ReapReport()
    for owner in engine.owners(selector(), OWNER):
        if owner and owner_is_dead(owner):
            report = engine.reap(selector(owner=owner))
            total.containers += report.containers
            total.networks += report.networks
            total.volumes += report.volumes
            total.errors += report.errors
    return total


def reap_cluster_orphans(cluster: Cluster) -> ClusterReapReport:
    """Reap the cluster objects of orchestrator processes whose heartbeat Leases went stale (on any host: the owner
    label is unique per process, and a pid says nothing about another machine that shares this hostname).

    Raises InfrastructureError when the API server does not answer.
    """
    from orchestrator.backends.kubernetes.cluster import ClusterReapReport
    from orchestrator.backends.kubernetes.owners import cluster_stale_owners

    total = ClusterReapReport()
    for owner in sorted(cluster_stale_owners(cluster)):
        report = cluster.reap(label_selector(owner=owner))
        total.pods += report.pods
        total.network_policies += report.network_policies
        total.leases += report.leases
        total.errors += report.errors
    return total


def episode_sandbox(engine: DockerEngine, images: SandboxImages, limits: SandboxLimits, labels: LabelSet, tuning: SandboxTuning,
                    kubernetes: KubernetesOptions | None,
                    progress: Progress = lambda message: None) -> ContextManager[DockerSandbox | KubernetesSandbox]:
    """The Episode sandbox of the chosen backend (not yet entered): the Docker engine's, or a cluster's when kubernetes is set.

    Raises InfrastructureError when the cluster does not answer.
    """
    if kubernetes is None:
        return DockerSandbox(engine, images, limits, labels, tuning=tuning)
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
    return KubernetesSandbox(cluster, pod_images, limits, labels, tuning=tuning, settings=settings)


@contextmanager
def open_sandbox(options: SandboxOptions, progress: Progress = lambda message: None) -> Iterator[DockerSandbox | KubernetesSandbox]:
    """Connect to the engine, make the images the benchmark needs, and yield a started sandbox.

    With options.environment_image the sandbox runs that image (benchmark_entry
    inside it) as it is; only the policy runtime image is built if needed.

    Raises InfrastructureError (engine, images, runner) and CatalogueError
    (unknown benchmark).
    """
    engine = DockerEngine.connect()
    builder = ImageBuilder(engine.client, base=options.base, environments=options.environments, progress=progress)
    reaped = reap_orphans(engine)
    if reaped.total:
        progress(f"reaped {reaped.total} leftovers of dead orchestrator processes")
    if options.environment_image:
        (policy_runtime,) = [r.tag for r in builder.ensure(["policy-runtime"])]
        images = SandboxImages(environment=options.environment_image, policy_runtime=policy_runtime, benchmark_entry=options.benchmark_entry)
    else:
        package, _benchmark_id, entry = resolve_benchmark(options.benchmark, builder.packages())
        results = {r.name: r.tag for r in builder.ensure(["policy-runtime", package.image])}
        images = SandboxImages(environment=results[package.image], policy_runtime=results["policy-runtime"], benchmark_entry=entry)
    labels = LabelSet(session=secrets.token_hex(6), owner=owner_id(), scope=options.scope)
    with episode_sandbox(engine, images, options.limits, labels, options.tuning, options.kubernetes, progress) as sandbox:
        yield sandbox


def sandbox_provenance(sandbox: DockerSandbox | KubernetesSandbox, package: EnvironmentPackage | None) -> dict[str, object]:
    """The provenance fields of an evaluation on sandbox: software, images (tag and id), the Benchmark package."""
    ids = sandbox.image_ids()
    images = {
        "policy_runtime": provenance.image(sandbox.images.policy_runtime, ids["policy_runtime"]),
        "environment": provenance.image(sandbox.images.environment, ids["environment"]),
    }
    fields: dict[str, object] = {"software": provenance.software(), "images": images}
    if package is not None:
        fields["benchmark_package"] = provenance.benchmark_package(package.distribution, package.version, package.image)
    return fields
