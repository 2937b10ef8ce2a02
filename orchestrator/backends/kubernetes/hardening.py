"""The field-by-field hardening check of a Pod manifest: what the Docker sandbox guarantees, in Kubernetes terms.

The sandbox runs it on every Pod before creating it; the manifest tests remove
each field in turn and expect a refusal.
"""

from __future__ import annotations

from typing import Any

from orchestrator.backends.kubernetes.manifests import OUTPUT_MOUNT, POLICY_CONTAINER, PROGRAM_MOUNT
from orchestrator.backends.labels import MANAGED, OWNER, ROLE, SANDBOX

_RESOURCES = ("memory", "cpu", "ephemeral-storage")
_WRITABLE_POLICY_MOUNTS = ("/tmp", "/dev/shm", OUTPUT_MOUNT)


def hardening_problems(pod: dict[str, Any], *, runtime_class_name: str = "") -> list[str]:
    """Return one line per hardening rule pod breaks (empty: it is hardened).

    runtime_class_name, when given, must be the Pod's runtimeClassName.
    """
    problems: list[str] = []
    metadata, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    labels = metadata.get("labels") or {}
    if labels.get(MANAGED) != "true":
        problems.append(f"metadata.labels: {MANAGED}=true is missing")
    problems += [f"metadata.labels: {key} is missing" for key in (ROLE, SANDBOX, OWNER) if not labels.get(key)]
    if spec.get("automountServiceAccountToken") is not False:
        problems.append("spec.automountServiceAccountToken: must be false")
    if spec.get("restartPolicy") != "Never":
        problems.append("spec.restartPolicy: must be Never (a policy container is never reused)")
    problems += [f"spec.{key}: must not be true" for key in ("hostNetwork", "hostPID", "hostIPC", "shareProcessNamespace")
                 if spec.get(key)]
    pod_context = spec.get("securityContext") or {}
    if pod_context.get("runAsNonRoot") is not True:
        problems.append("spec.securityContext.runAsNonRoot: must be true")
    if (pod_context.get("seccompProfile") or {}).get("type") != "RuntimeDefault":
        problems.append("spec.securityContext.seccompProfile.type: must be RuntimeDefault")
    if runtime_class_name and spec.get("runtimeClassName") != runtime_class_name:
        problems.append(f"spec.runtimeClassName: must be {runtime_class_name}")
    containers = spec.get("containers") or []
    if not containers:
        problems.append("spec.containers: none")
    if spec.get("initContainers") or spec.get("ephemeralContainers"):
        problems.append("spec: no init or ephemeral containers")
    for container in containers:
        problems += _container_problems(container)
        if container.get("name") == POLICY_CONTAINER:
            problems += _policy_volume_problems(container, spec.get("volumes") or [])
    return problems


def _policy_volume_problems(container: dict[str, Any], volumes: list[dict[str, Any]]) -> list[str]:
    """What the policy may write must be memory with a size limit: a write beyond it fails, and nothing it writes
    counts against the Pod's ephemeral storage (which would get the Pod evicted)."""
    by_name = {volume.get("name"): volume for volume in volumes}
    problems = []
    for mount in container.get("volumeMounts") or []:
        if mount.get("readOnly") is True:
            continue
        empty = (by_name.get(mount.get("name")) or {}).get("emptyDir") or {}
        if empty.get("medium") != "Memory" or not empty.get("sizeLimit"):
            problems.append(f"spec.volumes[{mount.get('name')}]: the policy writes it, so it must be a Memory emptyDir with a sizeLimit")
    return problems


def _container_problems(container: dict[str, Any]) -> list[str]:
    where = f"spec.containers[{container.get('name', '?')}]"
    problems: list[str] = []
    context = container.get("securityContext") or {}
    if context.get("runAsNonRoot") is not True:
        problems.append(f"{where}.securityContext.runAsNonRoot: must be true")
    if context.get("readOnlyRootFilesystem") is not True:
        problems.append(f"{where}.securityContext.readOnlyRootFilesystem: must be true")
    if context.get("allowPrivilegeEscalation") is not False:
        problems.append(f"{where}.securityContext.allowPrivilegeEscalation: must be false")
    if context.get("privileged"):
        problems.append(f"{where}.securityContext.privileged: must not be true")
    capabilities = context.get("capabilities") or {}
    if capabilities.get("drop") != ["ALL"] or capabilities.get("add"):
        problems.append(f"{where}.securityContext.capabilities: must drop ALL and add none")
    if (context.get("seccompProfile") or {}).get("type") != "RuntimeDefault":
        problems.append(f"{where}.securityContext.seccompProfile.type: must be RuntimeDefault")
    resources = container.get("resources") or {}
    requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
    for name in _RESOURCES:
        if name not in limits or requests.get(name) != limits.get(name):
            problems.append(f"{where}.resources: requests.{name} must equal limits.{name}")
    if container.get("name") == POLICY_CONTAINER:
        problems += _policy_mount_problems(where, container.get("volumeMounts") or [])
    return problems


def _policy_mount_problems(where: str, mounts: list[dict[str, Any]]) -> list[str]:
    problems = [f"{where}.volumeMounts[{m.get('mountPath')}]: must be readOnly" for m in mounts
                if m.get("mountPath") not in _WRITABLE_POLICY_MOUNTS and m.get("readOnly") is not True]
    if not any(m.get("mountPath") == PROGRAM_MOUNT for m in mounts):
        problems.append(f"{where}.volumeMounts: the Program is not mounted at {PROGRAM_MOUNT}")
    return problems
