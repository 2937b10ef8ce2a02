"""Every object the Kubernetes backend creates, as pure functions of typed settings (no cluster needed).

An Episode Pod holds the trusted runner container and the untrusted policy
container. They share two emptyDirs: `io` (the runner's slot directory, where
it opens policy.sock; read-only for the policy) and `program` (the Host writes
the Program there when the Episode begins; read-only for the policy). The
runner's own gRPC socket is in `exchange`, which only the runner mounts. The
policy's file descriptors 1 and 2 go to a file in `output`, a memory emptyDir
with a sizeLimit (read-only for the runner), never to the container log: a
container log counts against the Pod's ephemeral storage, and a policy that
flooded it would get the Pod evicted. A control Pod is a runner alone
(Describe, Plan, Feedback); a probe Pod checks that the sandbox's NetworkPolicy
holds; a Lease is the heartbeat of the process that owns the sandbox.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from orchestrator.backends.labels import MANAGED, SANDBOX, selector
from orchestrator.backends.settings import SandboxImages

# The versions whose schemas the manifests are validated against (tests/unit/test_k8s_manifests.py).
SUPPORTED_VERSIONS: tuple[str, ...] = ("1.30.0", "1.31.0", "1.32.0", "1.33.0", "1.34.0", "1.35.0", "1.36.0", "1.37.0")

POLICY_UID = 10001
RUNNER_UID = 10002
EXCHANGE_MOUNT = "/exchange"
SLOT = "p"  # the one slot of an Episode Pod: EXCHANGE/p is the io emptyDir
IO_MOUNT = "/epg/io"
PROGRAM_MOUNT = "/epg/program"
RUNNER_PROGRAM_MOUNT = "/program"
OUTPUT_MOUNT = "/epg/output"  # the policy's stdout and stderr, as a file
RUNNER_OUTPUT_MOUNT = "/policy-output"  # the same emptyDir, read-only in the runner container
OUTPUT_FILE = "policy.log"
RUNNER_CONTAINER = "runner"
POLICY_CONTAINER = "policy"
PROBE_CONTAINER = "probe"
EPISODE_ROLE = "episode"
CONTROL_ROLE = "runner"
PROBE_ROLE = "probe"
HEARTBEAT_ROLE = "heartbeat"
PROBE_REACHED = 10  # the probe's exit status when it reached a target

# Run in the policy container: connects to every HOST:PORT of argv and to the API server's service address the kubelet
# puts in the environment; prints what it reached and exits PROBE_REACHED if it reached anything, 0 otherwise.
PROBE = """\
import os, socket, sys, threading
targets = list(sys.argv[1:])
if os.environ.get("KUBERNETES_SERVICE_HOST"):
    targets.append(os.environ["KUBERNETES_SERVICE_HOST"] + ":" + os.environ.get("KUBERNETES_SERVICE_PORT", "443"))
reached = []
def attempt(target):
    host, _, port = target.rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=3).close()
        reached.append(target)
    except (OSError, ValueError):
        pass
threads = [threading.Thread(target=attempt, args=(t,), daemon=True) for t in targets]
for t in threads:
    t.start()
for t in threads:
    t.join(5)
print("reached: " + " ".join(sorted(reached)) if reached else "reached nothing: " + " ".join(targets), flush=True)
sys.exit(%d if reached else 0)
""" % PROBE_REACHED

_LABEL_VALUE_BAD = re.compile(r"[^A-Za-z0-9_.-]")


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterTarget:
    """Which cluster: a kubeconfig file (None: $KUBECONFIG or ~/.kube/config), its context ("" the current one), a namespace."""

    kubeconfig: str | None = None
    context: str = ""
    namespace: str = "default"


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyResources:
    """What the policy container may use (requests equal limits) and the sizes of its memory-backed mounts."""

    memory_bytes: int = 512 * 1024 * 1024
    cpu_millis: int = 1000
    tmp_bytes: int = 64 * 1024 * 1024
    shm_bytes: int = 16 * 1024 * 1024
    ephemeral_bytes: int = 64 * 1024 * 1024
    output_bytes: int = 1024 * 1024  # the file of its stdout and stderr (memory: writes beyond fail, nothing is evicted)


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterSettings:
    """Where and how Pods run: namespace, optional RuntimeClass (gVisor), the runner container's resources."""

    namespace: str = "default"
    runtime_class_name: str = ""
    runner_memory_bytes: int = 1024 * 1024 * 1024
    runner_cpu_millis: int = 1000
    runner_ephemeral_bytes: int = 256 * 1024 * 1024
    program_bytes: int = 64 * 1024 * 1024


def image_reference(registry_prefix: str, tag: str) -> str:
    """REGISTRY/epg/NAME:HASH for the local tag epg/NAME:HASH (what `images push --registry REGISTRY` names), or tag."""
    return f"{registry_prefix.rstrip('/')}/{tag}" if registry_prefix else tag


def label_value(value: str) -> str:
    """value as a valid label value: characters outside [A-Za-z0-9_.-] become '_', at most 63, alphanumeric ends."""
    cleaned = _LABEL_VALUE_BAD.sub("_", value)[:63]
    return cleaned.strip("_.-")


def k8s_labels(labels: dict[str, str]) -> dict[str, str]:
    """The orchestrator's labels (labels.LabelSet.for_role) with every value made label-safe (owner host:pid -> host_pid)."""
    return {key: label_value(value) for key, value in labels.items()}


def _quantity(n_bytes: int) -> str:
    return str(n_bytes)


def _resources(memory_bytes: int, cpu_millis: int, ephemeral_bytes: int) -> dict[str, Any]:
    amounts = {"memory": _quantity(memory_bytes), "cpu": f"{cpu_millis}m", "ephemeral-storage": _quantity(ephemeral_bytes)}
    return {"requests": dict(amounts), "limits": dict(amounts)}


def _security_context(uid: int) -> dict[str, Any]:
    return {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": uid,
        "readOnlyRootFilesystem": True,
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _memory_dir(name: str, size_bytes: int) -> dict[str, Any]:
    return {"name": name, "emptyDir": {"medium": "Memory", "sizeLimit": _quantity(size_bytes)}}


def _runner_container(images: SandboxImages, settings: ClusterSettings, mounts: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "name": RUNNER_CONTAINER,
        "image": images.environment,
        "imagePullPolicy": "IfNotPresent",
        # No -O, as in the Docker sandbox: the images hold no bytecode for it.
        "command": ["python3", "-m", "epg_sdk.runtime.runner", "--entry", images.benchmark_entry, "--exchange", EXCHANGE_MOUNT],
        "env": [{"name": "HOME", "value": "/tmp"}, {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"}],
        "workingDir": "/tmp",  # a simulator that writes beside itself (ViZDoom's ./_vizdoom.ini) writes to its scratch
        "volumeMounts": [{"name": "exchange", "mountPath": EXCHANGE_MOUNT}, {"name": "runner-tmp", "mountPath": "/tmp"}, *mounts],
        "resources": _resources(settings.runner_memory_bytes, settings.runner_cpu_millis, settings.runner_ephemeral_bytes),
        "securityContext": _security_context(RUNNER_UID),
    }


def _pod(name: str, labels: dict[str, str], settings: ClusterSettings, containers: list[dict[str, Any]],
         volumes: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "hostNetwork": False,
        "hostPID": False,
        "hostIPC": False,
        "shareProcessNamespace": False,
        "terminationGracePeriodSeconds": 0,
        "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        # Lanes spread over nodes: as even as the scheduler can, never refusing to schedule.
        "topologySpreadConstraints": [{
            "maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {MANAGED: "true", SANDBOX: labels[SANDBOX]}},
        }],
        "containers": containers,
        "volumes": volumes,
    }
    if settings.runtime_class_name:
        spec["runtimeClassName"] = settings.runtime_class_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": settings.namespace, "labels": k8s_labels(labels)},
        "spec": spec,
    }


def episode_pod(*, name: str, labels: dict[str, str], images: SandboxImages, policy: PolicyResources,
                settings: ClusterSettings) -> dict[str, Any]:
    """The Pod of one Episode: runner and policy containers sharing the io and program emptyDirs."""
    runner = _runner_container(images, settings, [
        {"name": "io", "mountPath": f"{EXCHANGE_MOUNT}/{SLOT}"},
        {"name": "program", "mountPath": RUNNER_PROGRAM_MOUNT},
        {"name": "output", "mountPath": RUNNER_OUTPUT_MOUNT, "readOnly": True},
    ])
    policy_container = {
        "name": POLICY_CONTAINER,
        "image": images.policy_runtime,
        "imagePullPolicy": "IfNotPresent",
        # The shell only redirects and execs: the runtime's descriptors 1 and 2 (whatever a Program or a library writes
        # to them) go to the bounded output file, not to the container log.
        "command": ["sh", "-c", f'exec "$@" >>{OUTPUT_MOUNT}/{OUTPUT_FILE} 2>&1', "sh",
                    "python3", "-m", "epg_sdk.runtime.policy_runtime", "--linger", f"{IO_MOUNT}/policy.sock"],
        "workingDir": PROGRAM_MOUNT,
        # One BLAS thread: the container has one CPU (as in the Docker sandbox).
        "env": [{"name": "HOME", "value": "/tmp"}, {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
                {"name": "OPENBLAS_NUM_THREADS", "value": "1"}],
        "volumeMounts": [
            {"name": "io", "mountPath": IO_MOUNT, "readOnly": True},
            {"name": "program", "mountPath": PROGRAM_MOUNT, "readOnly": True},
            {"name": "policy-tmp", "mountPath": "/tmp"},
            {"name": "shm", "mountPath": "/dev/shm"},
            {"name": "output", "mountPath": OUTPUT_MOUNT},
        ],
        "resources": _resources(policy.memory_bytes, policy.cpu_millis, policy.ephemeral_bytes),
        "securityContext": _security_context(POLICY_UID),
    }
    volumes = [
        {"name": "exchange", "emptyDir": {"sizeLimit": "1Mi"}},
        {"name": "io", "emptyDir": {"sizeLimit": "1Mi"}},
        {"name": "program", "emptyDir": {"sizeLimit": _quantity(settings.program_bytes)}},
        _memory_dir("runner-tmp", 64 * 1024 * 1024),
        _memory_dir("policy-tmp", policy.tmp_bytes),
        _memory_dir("shm", policy.shm_bytes),
        _memory_dir("output", policy.output_bytes),
    ]
    return _pod(name, labels, settings, [runner, policy_container], volumes)


def control_pod(*, name: str, labels: dict[str, str], images: SandboxImages, settings: ClusterSettings) -> dict[str, Any]:
    """The sandbox's control Pod: a runner alone, for Describe, Plan and BuildFeedback."""
    volumes = [{"name": "exchange", "emptyDir": {"sizeLimit": "1Mi"}}, _memory_dir("runner-tmp", 64 * 1024 * 1024)]
    return _pod(name, labels, settings, [_runner_container(images, settings, [])], volumes)


def probe_pod(*, name: str, labels: dict[str, str], images: SandboxImages, settings: ClusterSettings,
              targets: list[str]) -> dict[str, Any]:
    """A Pod of the sandbox that runs PROBE in the policy-runtime image, as the policy container runs: it tries to
    connect to each HOST:PORT of targets and to the API server's service address, then exits."""
    container = {
        "name": PROBE_CONTAINER,
        "image": images.policy_runtime,
        "imagePullPolicy": "IfNotPresent",
        "command": ["python3", "-c", PROBE, *targets],
        "resources": _resources(64 * 1024 * 1024, 100, 16 * 1024 * 1024),
        "securityContext": _security_context(POLICY_UID),
    }
    return _pod(name, labels, settings, [container], [])


def heartbeat_lease(*, name: str, labels: dict[str, str], namespace: str, holder: str, duration_s: int,
                    renew_time: str) -> dict[str, Any]:
    """The Lease an orchestrator process renews while its sandbox is open (renew_time: a MicroTime string)."""
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": namespace, "labels": k8s_labels(labels)},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration_s, "acquireTime": renew_time, "renewTime": renew_time},
    }


def deny_all_network_policy(*, name: str, labels: dict[str, str], namespace: str) -> dict[str, Any]:
    """A NetworkPolicy that denies all ingress and egress of every Pod of the sandbox (no rule allows anything)."""
    safe = k8s_labels(labels)
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace, "labels": safe},
        "spec": {
            "podSelector": {"matchLabels": {MANAGED: "true", SANDBOX: safe[SANDBOX]}},
            "policyTypes": ["Ingress", "Egress"],
        },
    }


def label_selector(**labels: str) -> str:
    """A Kubernetes label selector string matching managed objects with the given label values (short names as in
    labels.selector: sandbox, scope, owner, role)."""
    return ",".join(k8s_selector_term(term) for term in selector(**labels))


def k8s_selector_term(term: str) -> str:
    key, _, value = term.partition("=")
    return f"{key}={label_value(value)}"
