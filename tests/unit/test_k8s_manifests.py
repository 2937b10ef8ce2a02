"""Every object the Kubernetes backend creates: valid against the supported versions' schemas, offline, and hardened field by field."""

from __future__ import annotations

import copy

import kubernetes_validate
import pytest

from orchestrator.backends.kubernetes.hardening import hardening_problems
from orchestrator.backends.kubernetes.manifests import (
    SUPPORTED_VERSIONS,
    ClusterSettings,
    PolicyResources,
    control_pod,
    deny_all_network_policy,
    episode_pod,
    image_reference,
    k8s_labels,
    label_selector,
    label_value,
)
from orchestrator.backends.labels import MANAGED, OWNER, LabelSet
from orchestrator.backends.settings import SandboxImages
from orchestrator.images.registry import remote_reference

LABELS = LabelSet(sandbox="a1b2c3d4e5f6", owner="workstation.example:4242", scope="test-x").for_role("episode")
IMAGES = SandboxImages(environment="registry.example:5000/epg/env-cartpole:abc", policy_runtime="registry.example:5000/epg/policy-runtime:def",
                   benchmark_entry="epg_cartpole.benchmark:CartPole")
SETTINGS = ClusterSettings(namespace="epg", runtime_class_name="gvisor")


def _episode(settings: ClusterSettings = SETTINGS) -> dict:
    return episode_pod(name="epg-ep-a1b2c3d4e5f6-000001", labels=LABELS, images=IMAGES, policy=PolicyResources(), settings=settings)


def _objects() -> dict[str, dict]:
    return {
        "episode pod": _episode(),
        "episode pod without RuntimeClass": _episode(ClusterSettings(namespace="epg")),
        "control pod": control_pod(name="epg-ctl-a1b2c3d4e5f6", labels={**LABELS, "org.evopolicygym.role": "runner"},
                                   images=IMAGES, settings=SETTINGS),
        "network policy": deny_all_network_policy(name="epg-deny-a1b2c3d4e5f6", labels=LABELS, namespace="epg"),
    }


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
@pytest.mark.parametrize("kind", sorted(_objects()))
def test_every_manifest_is_valid_against_the_strict_schema_of_each_supported_version(kind, version):
    assert kubernetes_validate.validate(_objects()[kind], desired_version=version, strict=True) == version.rsplit(".", 1)[0]


def test_strict_validation_refuses_an_unknown_field():
    pod = _episode()
    pod["spec"]["containers"][1]["securityContext"]["noNewPrivileges"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(pod, desired_version=SUPPORTED_VERSIONS[-1], strict=True)


@pytest.mark.parametrize("kind", ["episode pod", "control pod"])
def test_the_pods_pass_the_hardening_check(kind):
    assert hardening_problems(_objects()[kind], runtime_class_name="gvisor") == []


# Every field the hardening check stands on, as a path into the Episode Pod (containers: 0 runner, 1 policy).
HARDENING_FIELDS = [
    ("metadata", "labels", MANAGED),
    ("metadata", "labels", "org.evopolicygym.sandbox"),
    ("metadata", "labels", "org.evopolicygym.role"),
    ("metadata", "labels", OWNER),
    ("spec", "automountServiceAccountToken"),
    ("spec", "restartPolicy"),
    ("spec", "runtimeClassName"),
    ("spec", "securityContext", "runAsNonRoot"),
    ("spec", "securityContext", "seccompProfile"),
    *[("spec", "containers", index, "securityContext", field) for index in (0, 1)
      for field in ("runAsNonRoot", "readOnlyRootFilesystem", "allowPrivilegeEscalation", "capabilities", "seccompProfile")],
    *[("spec", "containers", index, "resources", side, resource) for index in (0, 1) for side in ("requests", "limits")
      for resource in ("memory", "cpu", "ephemeral-storage")],
    ("spec", "containers", 1, "volumeMounts", 0, "readOnly"),  # io
    ("spec", "containers", 1, "volumeMounts", 1, "readOnly"),  # the Program
]


@pytest.mark.parametrize("path", HARDENING_FIELDS, ids=lambda path: ".".join(map(str, path)))
def test_the_hardening_check_refuses_a_pod_missing_any_one_field(path):
    pod = copy.deepcopy(_episode())
    parent = pod
    for key in path[:-1]:
        parent = parent[key]
    del parent[path[-1]]
    assert hardening_problems(pod, runtime_class_name="gvisor") != []


@pytest.mark.parametrize("change", [
    ("capabilities", {"drop": ["ALL"], "add": ["NET_RAW"]}),
    ("allowPrivilegeEscalation", True),
    ("privileged", True),
    ("readOnlyRootFilesystem", False),
])
def test_the_hardening_check_refuses_a_weakened_policy_container(change):
    pod = _episode()
    pod["spec"]["containers"][1]["securityContext"][change[0]] = change[1]
    assert hardening_problems(pod) != []


def test_requests_below_limits_are_refused():
    pod = _episode()
    pod["spec"]["containers"][1]["resources"]["requests"]["memory"] = "1"
    assert any("requests.memory" in p for p in hardening_problems(pod))


def test_host_namespaces_and_a_shared_process_namespace_are_refused():
    for key in ("hostNetwork", "hostPID", "hostIPC", "shareProcessNamespace"):
        pod = _episode()
        pod["spec"][key] = True
        assert hardening_problems(pod) == [f"spec.{key}: must not be true"]


def test_the_policy_sees_the_program_read_only_and_not_the_runner_socket():
    runner, policy = _episode()["spec"]["containers"]
    mounts = {m["mountPath"]: m for m in policy["volumeMounts"]}
    assert mounts["/epg/program"]["readOnly"] is True and mounts["/epg/io"]["readOnly"] is True
    assert "exchange" not in {m["name"] for m in policy["volumeMounts"]}
    assert "exchange" in {m["name"] for m in runner["volumeMounts"]}


def test_the_runner_works_in_its_writable_scratch_directory_under_a_read_only_root():
    runner = _episode()["spec"]["containers"][0]
    assert runner["securityContext"]["readOnlyRootFilesystem"] is True
    assert runner["workingDir"] == "/tmp" and {"name": "runner-tmp", "mountPath": "/tmp"} in runner["volumeMounts"]


def test_requests_equal_limits_give_the_sizes_asked_for():
    pod = episode_pod(name="x", labels=LABELS, images=IMAGES, policy=PolicyResources(memory_bytes=256 << 20, cpu_millis=500),
                      settings=SETTINGS)
    resources = pod["spec"]["containers"][1]["resources"]
    assert resources["limits"] == resources["requests"] == {"memory": str(256 << 20), "cpu": "500m", "ephemeral-storage": str(64 << 20)}


def test_the_network_policy_denies_both_directions_for_the_whole_sandbox():
    policy = deny_all_network_policy(name="n", labels=LABELS, namespace="epg")["spec"]
    assert policy["policyTypes"] == ["Ingress", "Egress"] and "ingress" not in policy and "egress" not in policy
    assert policy["podSelector"]["matchLabels"] == {MANAGED: "true", "org.evopolicygym.sandbox": "a1b2c3d4e5f6"}


def test_labels_are_made_label_safe_and_selectors_match_them():
    assert k8s_labels(LABELS)[OWNER] == "workstation.example_4242"
    assert label_value("-a:b-") == "a_b" and len(label_value("x" * 100)) == 63
    assert label_selector(owner="h:1") == f"{MANAGED}=true,{OWNER}=h_1"


def test_image_references_carry_the_registry_prefix():
    assert image_reference("registry.example:5000", "epg/env:1") == "registry.example:5000/epg/env:1"
    assert image_reference("", "epg/env:1") == "epg/env:1"


def test_the_pods_name_the_images_where_images_push_puts_them():
    for tag in ("epg/env-cartpole:0123abcd", "epg/policy-runtime:89ef"):
        assert image_reference("registry.example:5000", tag) == remote_reference("registry.example:5000", tag)
