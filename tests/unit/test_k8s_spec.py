"""sandbox.backend and sandbox.kubernetes in the Run spec: defaults keep existing specs unchanged; bad values name their field."""

from __future__ import annotations

import pytest
import yaml

from orchestrator.backends.kubernetes.manifests import ClusterTarget
from orchestrator.run.driver import kubernetes_options
from orchestrator.run.spec import RunSpec, SpecError, load_spec
from orchestrator.sandbox_opening import KubernetesOptions

BASE = {"benchmark": "CartPole-v1", "agent": {"kind": "hill-climb"}}


def test_a_spec_without_a_backend_runs_on_docker():
    spec = RunSpec.model_validate(BASE)
    assert spec.sandbox.backend == "docker" and kubernetes_options(spec) is None


def test_the_kubernetes_fields_reach_the_sandbox_options():
    spec = RunSpec.model_validate({**BASE, "sandbox": {"backend": "kubernetes", "kubernetes": {
        "context": "lab", "namespace": "epg", "registry_prefix": "registry.example:5000", "runtime_class_name": "gvisor"}}})
    assert kubernetes_options(spec) == KubernetesOptions(target=ClusterTarget(context="lab", namespace="epg"),
                                                         registry_prefix="registry.example:5000", runtime_class_name="gvisor")


@pytest.mark.parametrize(("sandbox", "problem"), [
    ({"backend": "nomad"}, "sandbox.backend: Input should be 'docker' or 'kubernetes'"),
    ({"kubernetes": {"namespace": "Not_A_Name"}}, "sandbox.kubernetes.namespace: String should match pattern"),
    ({"kubernetes": {"registry_prefix": "https://registry.example"}}, "sandbox.kubernetes.registry_prefix: String should match pattern"),
    ({"kubernetes": {"kubeconfig": "/x"}}, "sandbox.kubernetes.kubeconfig: unknown key"),
])
def test_bad_kubernetes_fields_name_their_path(tmp_path, sandbox, problem):
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({**BASE, "sandbox": sandbox}))
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    assert any(line.startswith(problem) for line in caught.value.problems), caught.value.problems


def test_forked_isolation_is_refused_on_a_cluster(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({**BASE, "sandbox": {"backend": "kubernetes", "isolation": "forked"}}))
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    assert any("sandbox.isolation forked runs on the Docker backend only" in line for line in caught.value.problems), caught.value.problems
    assert RunSpec.model_validate({**BASE, "sandbox": {"isolation": "forked"}}).sandbox.isolation == "forked"
    assert RunSpec.model_validate(BASE).sandbox.isolation == "container"
