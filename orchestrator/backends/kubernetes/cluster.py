"""The connected cluster: every Pod, NetworkPolicy and Lease is created here, with labels; cleanup reaps by label selector.

This module is the backend's one importer of the `kubernetes` client, an optional dependency (the distribution's
`kubernetes` extra): without it, importing this module raises ModuleNotFoundError (name `kubernetes`) whose
message names the extra, which the CLI prints as one line.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import urlsplit

import urllib3

try:
    from kubernetes import client, config, watch
    from kubernetes.client.exceptions import ApiException
    from kubernetes.config.config_exception import ConfigException
    from kubernetes.stream import stream
    from kubernetes.stream.ws_client import WSClient
except ImportError as exc:  # the extra is not installed, or the client cannot load: say which extra brings it
    raise ModuleNotFoundError("the Kubernetes backend needs the kubernetes client: pip install 'epg-orchestrator[kubernetes]'",
                              name="kubernetes") from exc

from epg_sdk.outcomes import ContainerExit
from orchestrator.backends.kubernetes.evictions import policy_eviction
from orchestrator.backends.kubernetes.manifests import ClusterTarget
from orchestrator.backends.labels import MANAGED
from orchestrator.kernel.infrastructure import InfraErrorCode, InfrastructureError

log = logging.getLogger(__name__)

API_TIMEOUT_S = 30.0


@dataclass(slots=True)
class ClusterReapReport:
    pods: int = 0
    network_policies: int = 0
    leases: int = 0
    directories: int = 0  # this host's work directories of dead processes (orchestrator.backends.workdirs)
    errors: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.pods + self.network_policies + self.leases + self.directories


def _api_error(message: str, exc: BaseException) -> InfrastructureError:
    return InfrastructureError(InfraErrorCode.ENGINE_UNAVAILABLE, message, evidence=str(exc))


class Cluster:
    """One namespace of a cluster, through the official client. Methods raise InfrastructureError when the API server
    refuses or does not answer (CONTAINER_FAILED for a refused object, ENGINE_UNAVAILABLE for no answer)."""

    def __init__(self, api_client: client.ApiClient, namespace: str) -> None:
        self.api_client = api_client
        self.namespace = namespace
        self.core = client.CoreV1Api(api_client)
        self.networking = client.NetworkingV1Api(api_client)
        self.coordination = client.CoordinationV1Api(api_client)

    @classmethod
    def connect(cls, target: ClusterTarget) -> Cluster:
        """Return the cluster of target once its API server answered a list of Pods in the namespace."""
        try:
            api_client = config.new_client_from_config(config_file=target.kubeconfig, context=target.context or None)
        except (ConfigException, OSError, TypeError) as exc:
            raise _api_error("no usable kubeconfig: set KUBECONFIG or sandbox.kubernetes.context", exc) from exc
        cluster = cls(api_client, target.namespace)
        try:
            cluster.core.list_namespaced_pod(target.namespace, limit=1, _request_timeout=API_TIMEOUT_S)
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
            raise _api_error(f"the Kubernetes API server did not list Pods in namespace {target.namespace!r}", exc) from exc
        return cluster

    # objects -----------------------------------------------------------------

    def create(self, manifest: dict[str, Any]) -> None:
        """Create a Pod or NetworkPolicy; every object must carry the managed label."""
        if (manifest["metadata"].get("labels") or {}).get(MANAGED) != "true":
            raise ValueError("every object the orchestrator creates must carry its labels")
        try:
            # The client sends a plain dict as it is (its models are one way to build a body, not the only one).
            if manifest["kind"] == "Pod":
                self.core.create_namespaced_pod(self.namespace, manifest, _request_timeout=API_TIMEOUT_S)  # type: ignore[arg-type]
            elif manifest["kind"] == "NetworkPolicy":
                self.networking.create_namespaced_network_policy(self.namespace, manifest,  # type: ignore[arg-type]
                                                                 _request_timeout=API_TIMEOUT_S)
            elif manifest["kind"] == "Lease":
                self.coordination.create_namespaced_lease(self.namespace, manifest, _request_timeout=API_TIMEOUT_S)  # type: ignore[arg-type]
            else:
                raise ValueError(f"the backend creates no {manifest['kind']}")
        except ApiException as exc:
            raise InfrastructureError(InfraErrorCode.CONTAINER_FAILED, f"the API server refused {manifest['kind']} "
                                      f"{manifest['metadata']['name']}", evidence=f"{exc.status} {exc.body}") from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise _api_error("the Kubernetes API server did not answer", exc) from exc

    def pod(self, name: str) -> client.V1Pod | None:
        try:
            return self.core.read_namespaced_pod(name, self.namespace, _request_timeout=API_TIMEOUT_S)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise _api_error(f"cannot read Pod {name}", exc) from exc

    def wait_running(self, name: str, timeout_s: float) -> client.V1Pod:
        """Watch Pod name until all its containers run; raise CONTAINER_FAILED if it ends first or timeout_s passes."""
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise InfrastructureError(InfraErrorCode.CONTAINER_FAILED, f"Pod {name} did not run within {timeout_s:.0f} s",
                                          evidence=self._describe(name))
            watcher = watch.Watch()
            try:
                for event in watcher.stream(self.core.list_namespaced_pod, self.namespace, field_selector=f"metadata.name={name}",
                                            timeout_seconds=max(1, int(remaining)), _request_timeout=remaining + 5):
                    pod: client.V1Pod = event["object"]  # the watch decodes each event of list_namespaced_pod as a V1Pod
                    status = pod.status  # None until the cluster has reported on the Pod: not running yet
                    phase = status.phase if status is not None else None
                    if event["type"] == "DELETED" or phase in ("Succeeded", "Failed"):
                        raise InfrastructureError(InfraErrorCode.CONTAINER_FAILED, f"Pod {name} ended before it ran",
                                                  evidence=self._describe(name))
                    statuses = (status.container_statuses if status is not None else None) or []
                    if phase == "Running" and statuses and all(s.state is not None and s.state.running for s in statuses):
                        return pod
            except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
                raise _api_error(f"watching Pod {name} failed", exc) from exc
            finally:
                watcher.stop()

    def _describe(self, name: str) -> str:
        try:
            pod = self.pod(name)
        except InfrastructureError as exc:
            return str(exc)
        return "" if pod is None else str(pod.status)

    def container_exit(self, name: str, container: str, wait_s: float) -> ContainerExit:
        """Wait up to wait_s for container of Pod name to terminate; return its exit status and OOM flag."""
        deadline = time.monotonic() + wait_s
        while True:
            pod = self.pod(name)
            state = None
            for status in (pod.status.container_statuses or []) if pod and pod.status else []:
                if status.name == container and status.state is not None:
                    state = status.state.terminated
            if state is not None:
                return ContainerExit(exit_code=state.exit_code, oom_killed=state.reason == "OOMKilled")
            if pod is None or time.monotonic() > deadline:
                return ContainerExit(exit_code=None)
            time.sleep(0.05)

    def policy_eviction(self, name: str, container: str, volumes: tuple[str, ...], wait_s: float) -> str | None:
        """Wait up to wait_s for Pod name to end; return the readable reason when the cluster evicted it for what
        container (and its volumes) used (evictions.policy_eviction), None when it did not (still running, gone, or
        evicted for anything else)."""
        deadline = time.monotonic() + wait_s
        while True:
            pod = self.pod(name)
            if pod is None:
                return None
            status = pod.status
            if status is not None and (status.phase in ("Failed", "Succeeded") or status.reason):
                return policy_eviction(status.reason or "", status.message or "", container, volumes)
            if time.monotonic() > deadline:
                return None
            time.sleep(0.1)

    def run_to_end(self, name: str, container: str, timeout_s: float) -> int | None:
        """Wait up to timeout_s for container of Pod name to terminate; return its exit code (None: it did not)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            exit_status = self.container_exit(name, container, min(5.0, max(0.0, deadline - time.monotonic())))
            if exit_status.exit_code is not None:
                return exit_status.exit_code
            pod = self.pod(name)
            if pod is None or (pod.status is not None and pod.status.phase in ("Failed", "Succeeded")):
                return None
        return None

    def server_address(self) -> str:
        """HOST:PORT of the API server as the kubeconfig names it ("" when it names none)."""
        parts = urlsplit(self.api_client.configuration.host or "")
        if not parts.hostname:
            return ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
        host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
        return f"{host}:{port}"

    # leases --------------------------------------------------------------------

    def renew_lease(self, name: str, renew_time: str) -> bool:
        """Set Lease name's renewTime; return False when it does not exist. Raises InfrastructureError."""
        try:
            self.coordination.patch_namespaced_lease(name, self.namespace, {"spec": {"renewTime": renew_time}},
                                                     _content_type="application/merge-patch+json", _request_timeout=API_TIMEOUT_S)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise _api_error(f"cannot renew Lease {name}", exc) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise _api_error(f"cannot renew Lease {name}", exc) from exc
        return True

    def leases(self, selector: str) -> list[client.V1Lease]:
        """The Leases of the namespace matching the label selector."""
        try:
            return self.coordination.list_namespaced_lease(self.namespace, label_selector=selector, _request_timeout=API_TIMEOUT_S).items
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
            raise _api_error("cannot list the labelled Leases", exc) from exc

    def logs_tail(self, name: str, container: str, max_bytes: int) -> bytes:
        try:
            text = self.core.read_namespaced_pod_log(name, self.namespace, container=container, tail_lines=200,
                                                     _request_timeout=API_TIMEOUT_S)
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
            return f"<logs unavailable: {exc}>".encode()
        return text.encode("utf-8", "replace")[-max_bytes:]

    def delete_pod(self, name: str) -> bool:
        """Delete Pod name at once (grace 0); return False (and log why) when the API server refused."""
        try:
            self.core.delete_namespaced_pod(name, self.namespace, grace_period_seconds=0, _request_timeout=API_TIMEOUT_S)
        except ApiException as exc:
            if exc.status == 404:
                return True
            log.warning("could not delete Pod %s: %s", name, exc.reason)
            return False
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            log.warning("could not delete Pod %s: %s", name, exc)
            return False
        return True

    def reap(self, selector: str) -> ClusterReapReport:
        """Delete every Pod, NetworkPolicy and Lease of the namespace matching the label selector.

        The Leases (heartbeats) go last, and only when everything else went: leftovers keep their owner's Lease,
        which then goes stale, so that a later reaper still finds them.
        """
        report = ClusterReapReport()
        try:
            pods = self.core.list_namespaced_pod(self.namespace, label_selector=selector, _request_timeout=API_TIMEOUT_S).items
            policies = self.networking.list_namespaced_network_policy(self.namespace, label_selector=selector,
                                                                      _request_timeout=API_TIMEOUT_S).items
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
            raise _api_error("cannot list the labelled objects", exc) from exc
        for pod in pods:
            name = pod.metadata.name if pod.metadata and pod.metadata.name else ""
            if name and self.delete_pod(name):
                report.pods += 1
            else:
                report.errors.append(f"pod {name}")
        report.network_policies = self._delete_each("networkpolicy", policies, self.networking.delete_namespaced_network_policy,
                                                    report.errors)
        if report.errors:
            return report
        report.leases = self._delete_each("lease", self.leases(selector), self.coordination.delete_namespaced_lease, report.errors)
        return report

    def _delete_each(self, kind: str, objects: list[Any], delete: Callable[..., Any], errors: list[str]) -> int:
        """Delete each object of the namespace with delete(name, namespace); return how many went. One already gone
        counts for nothing; any other refusal is appended to errors as "KIND NAME: REASON"."""
        deleted = 0
        for obj in objects:
            try:
                delete(obj.metadata.name, self.namespace, _request_timeout=API_TIMEOUT_S)
                deleted += 1
            except ApiException as exc:
                if exc.status != 404:
                    errors.append(f"{kind} {obj.metadata.name}: {exc.reason}")
        return deleted

    def label_values(self, selector: str, key: str) -> set[str]:
        """The values of label key on the Pods, NetworkPolicies and Leases matching selector."""
        try:
            pods = self.core.list_namespaced_pod(self.namespace, label_selector=selector, _request_timeout=API_TIMEOUT_S).items
            policies = self.networking.list_namespaced_network_policy(self.namespace, label_selector=selector,
                                                                      _request_timeout=API_TIMEOUT_S).items
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
            raise _api_error("cannot list the labelled objects", exc) from exc
        objects: list[Any] = [*pods, *policies, *self.leases(selector)]  # each has metadata, none shares a base class
        return {(item.metadata.labels or {}).get(key, "") for item in objects}

    # streams -------------------------------------------------------------------

    def exec_stream(self, name: str, container: str, command: list[str]) -> WSClient:
        """Open an exec stream (stdin, stdout, stderr; bytes) into container of Pod name running command.

        `stream()` swaps the ApiClient's transport while it opens the stream, so
        each stream gets its own ApiClient: concurrent calls never see the swap.
        """
        api_client = client.ApiClient(self.api_client.configuration)
        try:
            opened: WSClient = stream(client.CoreV1Api(api_client).connect_get_namespaced_pod_exec, name, self.namespace,
                                      container=container, command=command, stdin=True, stdout=True, stderr=True, tty=False,
                                      _preload_content=False, binary=True)  # with _preload_content=False, the open WSClient
            return opened
        except (ApiException, OSError) as exc:
            raise InfrastructureError(InfraErrorCode.RUNNER_FAILED, f"cannot exec into Pod {name}", evidence=str(exc)) from exc
        finally:
            api_client.close()
