"""The Kubernetes backend's pure safety rules: which evictions are the policy's, which owners are stale, image digests,
and the Pod fields that keep a policy's output off the container log."""

from __future__ import annotations

import os
import threading
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from orchestrator.backends.kubernetes.digests import has_registry, pin_images, registry_resolver, split_reference
from orchestrator.backends.kubernetes.evictions import STORAGE_REASON, policy_eviction
from orchestrator.backends.kubernetes.hardening import hardening_problems
from orchestrator.backends.kubernetes.manifests import (
    OUTPUT_MOUNT,
    RUNNER_OUTPUT_MOUNT,
    ClusterSettings,
    PolicyResources,
    episode_pod,
    probe_pod,
)
from orchestrator.backends.kubernetes.owners import process_owner, stale_owners
from orchestrator.backends.labels import LabelSet
from orchestrator.backends.settings import SandboxImages
from orchestrator.kernel.infrastructure import InfrastructureError

LABELS = LabelSet(sandbox="a1b2c3d4e5f6", owner="h_1_abc", scope="test-x").for_role("episode")
IMAGES = SandboxImages(environment="epg/env-cartpole:abc", policy_runtime="epg/policy-runtime:def", benchmark_entry="m:B")
POLICY_VOLUMES = ("policy-tmp", "shm", "output")
NOW = datetime(2026, 12, 2, 3, 0, tzinfo=timezone.utc)


# evictions -----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("message", [
    'Container policy exceeded its local ephemeral storage limit "64Mi". ',
    "Pod ephemeral local storage usage exceeds the total limit of containers 320Mi. ",
    'Usage of EmptyDir volume "output" exceeds the limit "1Mi". ',
])
def test_a_storage_eviction_of_an_episode_pod_is_the_policys_failure(message):
    assert policy_eviction("Evicted", message, "policy", POLICY_VOLUMES) == STORAGE_REASON


def test_a_node_pressure_eviction_is_the_policys_only_when_the_kubelet_names_the_policy():
    named = ("The node was low on resource: ephemeral-storage. Threshold quantity: 10Gi, available: 1Gi. "
             "Container policy was using 3Gi, which exceeds its request of 64Mi. ")
    reason = policy_eviction("Evicted", named, "policy", POLICY_VOLUMES)
    assert reason is not None and "ephemeral-storage" in reason and "10Gi" not in reason  # nothing of the cluster's wording
    assert policy_eviction("Evicted", named.replace("Container policy", "Container runner"), "policy", POLICY_VOLUMES) is None


@pytest.mark.parametrize(("reason", "message"), [
    ("Evicted", 'Container runner exceeded its local ephemeral storage limit "256Mi". '),  # ours: a bug, not the policy's
    ("Evicted", 'Usage of EmptyDir volume "program" exceeds the limit "64Mi". '),
    ("Preempting", "Preempted in order to admit critical pod"),
    ("", ""),
    ("NodeLost", "Node foo which was running pod bar is unresponsive"),
])
def test_other_endings_of_a_pod_are_not_the_policys(reason, message):
    assert policy_eviction(reason, message, "policy", POLICY_VOLUMES) is None


# owners and heartbeats --------------------------------------------------------------------------------------------------

def test_an_owner_with_a_fresh_heartbeat_is_never_reaped_even_with_this_hostname_and_a_dead_pid():
    mine, twin, gone = "host_999999_aaaaaaaaaaaa", "host_999999_bbbbbbbbbbbb", "host_42_cccccccccccc"
    leases = [(mine, NOW - timedelta(seconds=5)), (twin, NOW - timedelta(seconds=15)), (gone, NOW - timedelta(minutes=10)),
              (gone, None)]
    assert stale_owners(leases, {mine, twin, gone}, NOW) == {gone}


def test_an_owner_without_any_heartbeat_is_left_alone_and_a_stale_one_of_several_sessions_needs_all_stale():
    old, busy = "h_1_old", "h_2_busy"
    leases = [(busy, NOW - timedelta(minutes=30)), (busy, NOW - timedelta(seconds=1))]
    assert stale_owners(leases, {"legacy_123", old, busy}, NOW) == set()


def test_the_owner_label_is_label_safe_bounded_and_unique_per_process(monkeypatch):
    monkeypatch.setattr("socket.gethostname", lambda: "a-very:long.host" * 10)
    owner = process_owner()
    assert len(owner) <= 63 and owner.split("_")[-2] == str(os.getpid()) and ":" not in owner
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # a forked process draws its own token
        os.write(write, process_owner().encode())
        os._exit(0)
    os.waitpid(child, 0)
    theirs = os.read(read, 100).decode()
    assert theirs.split("_")[-1] != owner.split("_")[-1]


# output and probe Pods ------------------------------------------------------------------------------------------------------

def test_the_policys_descriptors_go_to_a_bounded_memory_file_not_the_container_log():
    pod = episode_pod(name="p", labels=LABELS, images=IMAGES, policy=PolicyResources(), settings=ClusterSettings())
    runner, policy = pod["spec"]["containers"]
    assert policy["command"][:2] == ["sh", "-c"] and f">>{OUTPUT_MOUNT}/policy.log 2>&1" in policy["command"][2]
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes["output"]["emptyDir"] == {"medium": "Memory", "sizeLimit": str(1 << 20)}
    assert {"name": "output", "mountPath": RUNNER_OUTPUT_MOUNT, "readOnly": True} in runner["volumeMounts"]
    assert hardening_problems(pod) == []


def test_the_hardening_check_refuses_a_policy_writable_volume_on_disk():
    pod = episode_pod(name="p", labels=LABELS, images=IMAGES, policy=PolicyResources(), settings=ClusterSettings())
    for volume in pod["spec"]["volumes"]:
        if volume["name"] == "output":
            volume["emptyDir"] = {"sizeLimit": "1Mi"}  # disk: the kubelet would count it and evict
    assert hardening_problems(pod) == ["spec.volumes[output]: the policy writes it, so it must be a Memory emptyDir with a sizeLimit"]


def test_the_probe_pod_is_hardened_and_runs_under_the_sessions_labels():
    pod = probe_pod(name="epg-probe-x", labels=LABELS, images=IMAGES, settings=ClusterSettings(), targets=["10.0.0.1:6443"])
    assert hardening_problems(pod) == []
    assert pod["metadata"]["labels"]["org.evopolicygym.sandbox"] == "a1b2c3d4e5f6"
    assert pod["spec"]["containers"][0]["command"][-1] == "10.0.0.1:6443"
    assert pod["spec"]["automountServiceAccountToken"] is False


# digests -------------------------------------------------------------------------------------------------------------------

DIGEST = "sha256:" + "ab" * 32


class _Registry(BaseHTTPRequestHandler):
    """A registry on loopback that answers a manifest HEAD for epg/*:good with DIGEST and 404 otherwise."""

    seen: list[str] = []

    def do_HEAD(self) -> None:  # noqa: N802
        type(self).seen.append(self.path)
        good = self.path.endswith(":good") or self.path.endswith("/good")
        self.send_response(200 if good else 404)
        if good:
            self.send_header("Docker-Content-Digest", DIGEST)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def registry():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Registry)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_registry_references_are_pinned_to_the_digest_the_registry_names_and_pods_carry_it(registry):
    images = SandboxImages(environment=f"{registry}/epg/env-cartpole:good", policy_runtime=f"{registry}/epg/policy-runtime:good",
                       benchmark_entry="m:B")
    pinned = pin_images(images, registry_resolver())
    assert pinned.environment == f"{registry}/epg/env-cartpole@{DIGEST}"
    assert pinned.policy_runtime == f"{registry}/epg/policy-runtime@{DIGEST}"
    assert "/v2/epg/env-cartpole/manifests/good" in _Registry.seen
    pod = episode_pod(name="p", labels=LABELS, images=pinned, policy=PolicyResources(), settings=ClusterSettings())
    assert [c["image"] for c in pod["spec"]["containers"]] == [pinned.environment, pinned.policy_runtime]


def test_a_tag_the_registry_lacks_is_an_error_and_local_references_stay_as_they_are(registry):
    with pytest.raises(InfrastructureError, match="cannot resolve .* to a digest"):
        registry_resolver()(f"{registry}/epg/env-cartpole:moved")
    assert pin_images(IMAGES, lambda reference: pytest.fail("a local tag has no registry to ask")) == IMAGES


def test_references_are_split_at_the_tag_not_the_registry_port():
    assert split_reference("127.0.0.1:5000/epg/env:1") == ("127.0.0.1:5000", "epg/env", "1")
    assert split_reference("registry.example/epg/env") == ("registry.example", "epg/env", "latest")
    assert has_registry("localhost/x:1") and has_registry("r.example/x") and not has_registry("epg/env:1")
