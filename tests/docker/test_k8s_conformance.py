"""The Kubernetes backend against a real cluster: run when KUBECONFIG is set, skipped otherwise (the only test that may skip).

The cluster must pull the images the local builder makes: push them first with
`epg-orchestrate images push --registry HOST[:PORT]` and set EPG_K8S_REGISTRY to
that registry (unset: the nodes hold the local tags, as on a single-node kind or
minikube sharing the Docker engine). EPG_K8S_NAMESPACE names the namespace
(default: default), EPG_K8S_CONTEXT the kubeconfig context (default: the current one).
"""

from __future__ import annotations

import os
import secrets

import pytest
from programs import STEADY

from orchestrator.backends.kubernetes.cluster import Cluster
from orchestrator.backends.kubernetes.manifests import ClusterSettings, ClusterTarget, image_reference, label_selector
from orchestrator.backends.kubernetes.sandbox import KubernetesSandbox
from orchestrator.backends.labels import LabelSet, owner_id
from orchestrator.backends.settings import SandboxImages, SandboxTuning
from orchestrator.images.catalogue import resolve_benchmark
from orchestrator.kernel.evaluation import evaluate_program
from orchestrator.kernel.program import capture_program

pytestmark = pytest.mark.skipif(
    not os.environ.get("KUBECONFIG"),
    reason="no real cluster: set KUBECONFIG (and EPG_K8S_REGISTRY, EPG_K8S_NAMESPACE) to run the Kubernetes conformance test",
)

CRASHING = """
def make_policy(context):
    class Policy:
        def act(self, observation):
            raise RuntimeError("deliberate")
    return Policy()
"""


def test_a_real_cluster_runs_episodes_as_the_docker_sandbox_does_and_keeps_nothing(images, builder, open_sandbox, write_program, scope):
    namespace = os.environ.get("EPG_K8S_NAMESPACE", "default")
    registry = os.environ.get("EPG_K8S_REGISTRY", "")
    cluster = Cluster.connect(ClusterTarget(context=os.environ.get("EPG_K8S_CONTEXT", ""), namespace=namespace))
    package, _, entry = resolve_benchmark("CartPole-v1", builder.packages())
    pod_images = SandboxImages(environment=image_reference(registry, images[package.image]),
                           policy_runtime=image_reference(registry, images["policy-runtime"]), benchmark_entry=entry)
    labels = LabelSet(sandbox=secrets.token_hex(6), owner=owner_id(), scope=scope)
    programs = [capture_program(write_program(source)) for source in (STEADY, CRASHING)]
    with KubernetesSandbox(cluster, pod_images, labels=labels, tuning=SandboxTuning(concurrency=2, pool_size=2),
                           settings=ClusterSettings(namespace=namespace)) as sandbox:
        on_cluster = [evaluate_program(sandbox, p, split="train", seed=3, episodes=2).feedback for p in programs]
    with open_sandbox() as sandbox:
        on_docker = [evaluate_program(sandbox, p, split="train", seed=3, episodes=2).feedback for p in programs]
    for cluster_feedback, docker_feedback in zip(on_cluster, on_docker, strict=True):
        assert [(e.status, e.failure, e.steps, e.reward) for e in cluster_feedback.episodes] == \
               [(e.status, e.failure, e.steps, e.reward) for e in docker_feedback.episodes]
    assert cluster.label_values(label_selector(sandbox=labels.sandbox), "org.evopolicygym.sandbox") == set()
