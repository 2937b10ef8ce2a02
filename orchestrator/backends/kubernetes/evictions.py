"""Which evictions of an Episode Pod the policy caused: a pure reading of the Pod's status reason and message.

A kubelet evicts a Pod whose containers use more ephemeral storage than their
limits (container logs, writable layers, disk emptyDirs), whose emptyDir
outgrows its sizeLimit, or, when its node runs low on a resource, the Pod
that uses the most of it beyond its request. An Episode Pod runs one Episode
of one Program; the runner beside it is trusted code whose use is bounded by
the Host, so such an eviction is the policy's doing: a scored policy failure,
never an infrastructure error (which would void and refund the Submission).
Any other ending (preemption, a drained node, a deleted Pod) is not the
policy's and stays an infrastructure error.

The kubelet's messages are not an API; what is matched is their stable part
(pkg/kubelet/eviction in Kubernetes 1.30 to 1.37). The reason published to
the agent is a fixed text: nothing of the cluster's own wording reaches it.
"""

from __future__ import annotations

EVICTED = "Evicted"
_NODE_PRESSURE = "The node was low on resource"
_POD_STORAGE = "Pod ephemeral local storage usage exceeds"

STORAGE_REASON = "the policy's Pod was evicted by the cluster: it exceeded its ephemeral storage limit"
NODE_REASON = "the policy's Pod was evicted by the cluster: its node ran low on {resource} and the policy used the most of it"


def policy_eviction(reason: str, message: str, policy_container: str, policy_volumes: tuple[str, ...] = ()) -> str | None:
    """Return the readable failure reason when a Pod whose status says (reason, message) was evicted for what
    policy_container used (its own storage, the Pod's total, an emptyDir among policy_volumes, or the most of a
    resource its node ran low on); None when the Pod was not evicted or was evicted for anything else."""
    if reason != EVICTED:
        return None
    if message.startswith(_NODE_PRESSURE):
        # "The node was low on resource: memory. Threshold quantity: ... Container policy was using 3Gi, which exceeds ..."
        if f"Container {policy_container} was using" not in message:
            return None
        resource = message[len(_NODE_PRESSURE):].lstrip(": ").split(".", 1)[0].strip()
        return NODE_REASON.format(resource=resource if resource in ("memory", "ephemeral-storage", "pids") else "a resource")
    if (message.startswith(_POD_STORAGE)
            or message.startswith(f"Container {policy_container} exceeded its local ephemeral storage limit")
            or any(message.startswith(f'Usage of EmptyDir volume "{volume}" exceeds') for volume in policy_volumes)):
        return STORAGE_REASON
    return None
