"""The fake API server's kubelet, for tests only: each container of a Pod runs as a local Docker container.

The translation is the hardened Docker spec (orchestrator.backends.container_spec
through DockerEngine.start): the Pod's securityContext user, its read-only root,
memory and CPU limits, memory emptyDirs as tmpfs (/dev/shm as the shm size; one
that several containers mount as one labelled Docker tmpfs volume they share, as
a Pod's containers share it), disk emptyDirs as bind mounts of one host
directory per volume (0777, as a kubelet makes them), readOnly mounts read-only. Every container gets no
network at all, which is stricter than a Pod under a deny-all NetworkPolicy
(its containers share the Pod's loopback; ours do not, and nothing of ours
listens on TCP). runtimeClassName "gvisor" maps to runsc. A monitor thread turns
Docker states into containerStatuses.

What a kubelet does that the backend's safety rests on, the fake does too:
every container gets KUBERNETES_SERVICE_HOST and _PORT (the fake API server's
loopback address); a container's log counts against its `ephemeral-storage`
limit, and a Pod whose container logs more is evicted (phase Failed, reason
Evicted, the kubelet's message), as `evict()` does on demand; an image named
by a loopback registry is pulled when the engine lacks it. Setting
`network_policy_enforced = False` stands for a CNI that ignores NetworkPolicy:
Pods created afterwards share the host's network namespace, so they reach the
fake API server on 127.0.0.1 (and nothing but loopback is ever addressed).
Nothing here is a product feature.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import struct
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Iterable, Iterator

from docker.types import Mount

from orchestrator.backends.container_spec import BindMount, ContainerSpec, to_docker_kwargs
from orchestrator.backends.engine import DockerEngine
from orchestrator.backends.labels import MANAGED

log = logging.getLogger(__name__)

RUNTIME_CLASSES = {"gvisor": "runsc", "runc": "runc"}


def _bytes(quantity: str) -> int:
    units = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30}
    for suffix, factor in units.items():
        if quantity.endswith(suffix):
            return int(quantity[: -len(suffix)]) * factor
    return int(quantity)


def _nano_cpus(quantity: str) -> int:
    return int(quantity[:-1]) * 1_000_000 if quantity.endswith("m") else int(float(quantity) * 1e9)


def shared_memory_volumes(pod: dict[str, Any]) -> dict[str, int]:
    """Name -> size in bytes of each memory emptyDir of pod that more than one of its containers mounts (not as /dev/shm)."""
    users: dict[str, int] = {}
    for container in pod["spec"]["containers"]:
        for mount in container.get("volumeMounts", []):
            if mount["mountPath"] != "/dev/shm":
                users[mount["name"]] = users.get(mount["name"], 0) + 1
    shared = {}
    for volume in pod["spec"].get("volumes", []):
        empty = volume.get("emptyDir", {})
        if empty.get("medium") == "Memory" and users.get(volume["name"], 0) > 1:
            shared[volume["name"]] = _bytes(empty.get("sizeLimit", "64Mi"))
    return shared


def _in_shared_volume(mount: dict[str, Any], shared: Iterable[str]) -> bool:
    """Whether a container's volumeMount is of a shared memory emptyDir (names in shared), and so a Docker volume's."""
    return mount["name"] in shared and mount["mountPath"] != "/dev/shm"


def volume_mounts(container: dict[str, Any], docker_volumes: dict[str, str]) -> list[Mount]:
    """The Docker volume mounts of container for the Pod's shared memory emptyDirs (volume name -> Docker volume)."""
    return [Mount(target=m["mountPath"], source=docker_volumes[m["name"]], type="volume", read_only=bool(m.get("readOnly")))
            for m in container.get("volumeMounts", []) if _in_shared_volume(m, docker_volumes)]


def container_spec(pod: dict[str, Any], container: dict[str, Any], volume_dirs: dict[str, Path], pids_limit: int,
                   service: tuple[str, int] | None = None) -> ContainerSpec:
    """The hardened Docker spec of one container of pod (pure apart from the volume directories given); service is the
    API server's address the kubelet puts in every container's environment. A memory emptyDir that several containers
    share is not in it: volume_mounts() gives its mount."""
    volumes = {v["name"]: v for v in pod["spec"].get("volumes", [])}
    shared = shared_memory_volumes(pod)
    context = container.get("securityContext") or {}
    tmpfs: dict[str, str] = {}
    mounts: list[BindMount] = []
    shm = 64 * 1024 * 1024
    for mount in sorted(container.get("volumeMounts", []), key=lambda m: m["mountPath"].count("/")):
        empty = volumes[mount["name"]].get("emptyDir", {})
        if _in_shared_volume(mount, shared):
            continue
        if empty.get("medium") == "Memory":
            size = _bytes(empty.get("sizeLimit", "64Mi"))
            if mount["mountPath"] == "/dev/shm":
                shm = size
            else:
                tmpfs[mount["mountPath"]] = f"rw,nosuid,nodev,size={size}"
        else:
            mounts.append(BindMount(source=str(volume_dirs[mount["name"]]), target=mount["mountPath"],
                                    read_only=bool(mount.get("readOnly"))))
    limits = container["resources"]["limits"]
    environment = {e["name"]: e["value"] for e in container.get("env", [])}
    if service is not None:
        environment.update(KUBERNETES_SERVICE_HOST=service[0], KUBERNETES_SERVICE_PORT=str(service[1]))
    # The log may outgrow the ephemeral-storage limit (a kubelet rotates logs only every few seconds): the monitor sees it.
    log_max = 4 * _bytes(limits.get("ephemeral-storage", "16Mi")) + (1 << 20)
    return ContainerSpec(
        image=container["image"],
        command=tuple(container["command"]),
        labels={**pod["metadata"]["labels"], MANAGED: "true"},
        user=f"{context['runAsUser']}:{context.get('runAsGroup', context['runAsUser'])}",
        read_only_root=bool(context.get("readOnlyRootFilesystem")),
        tmpfs=tmpfs,
        shm_bytes=shm,
        mounts=tuple(mounts),
        memory_bytes=_bytes(limits["memory"]),
        nano_cpus=_nano_cpus(limits["cpu"]),
        pids_limit=pids_limit,
        environment=environment,
        log_max_bytes=log_max,
        working_dir=container.get("workingDir", "/"),
        name=f"fake-{pod['metadata']['name']}-{container['name']}",
        hostname=container["name"],
        runtime=RUNTIME_CLASSES[pod["spec"].get("runtimeClassName", "runc")],
    )


class _Exec:
    """One `docker exec` with stdin attached: output() yields (channel, bytes) until the process ends."""

    def __init__(self, engine: DockerEngine, container_id: str, command: list[str]) -> None:
        self._api = engine.client.api
        self._id = self._api.exec_create(container_id, command, stdin=True, stdout=True, stderr=True)["Id"]
        # Held for the session's life: docker-py's socket wrapper keeps the HTTP response, whose collection (at any
        # garbage collection) would close the hijacked socket under a running exec.
        self._raw = self._api.exec_start(self._id, socket=True)
        self._sock: socket.socket = getattr(self._raw, "_sock", self._raw)
        # docker-py's 60 s API timeout would end a stream whose process is quiet for a minute (a runner waiting for an
        # Episode's policy); a kubelet's exec streams have no such timeout.
        self._sock.settimeout(None)

    def write_stdin(self, data: bytes) -> None:
        self._sock.sendall(data)

    def close_stdin(self) -> None:
        try:
            self._sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def _read(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self._sock.recv(n)
            if not chunk:
                return b""
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def output(self) -> Iterator[tuple[int, bytes]]:
        while True:
            header = self._read(8)
            if len(header) < 8:
                return
            stream, size = header[0], struct.unpack(">I", header[4:])[0]
            data = self._read(size)
            if data:
                yield (1 if stream == 1 else 2), data

    def exit_code(self) -> int:
        for _ in range(100):
            info = self._api.exec_inspect(self._id)
            if not info.get("Running"):
                return info.get("ExitCode") or 0
            time.sleep(0.02)
        return -1

    def close(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass


class FakeKubelet:
    """Runs Pods as Docker containers; pids_limit stands for the kubelet's podPidsLimit."""

    def __init__(self, engine: DockerEngine, pids_limit: int = 64) -> None:
        self._engine = engine
        self._pids = pids_limit
        self._root = Path(tempfile.mkdtemp(prefix="fake-kubelet-"))
        self._lock = threading.Lock()
        self._pods: dict[tuple[str, str], dict[str, Any]] = {}  # (namespace, name) -> {"containers": {name: Container}, "dir": Path}
        self._store: Any = None
        self.execs: list[tuple[str, str, tuple[str, ...]]] = []  # (Pod, container, command) of every exec, for assertions
        self._closed = threading.Event()
        self._monitor = threading.Thread(target=self._monitor_loop, name="fake-kubelet", daemon=True)
        self.service_address: tuple[str, int] | None = None  # set by the fake API server
        self.network_policy_enforced = True
        self.evictions: list[tuple[str, str]] = []  # (Pod, message) of every eviction, for assertions

    def attach(self, store: Any) -> None:
        self._store = store
        self._monitor.start()

    # Pods ------------------------------------------------------------------------

    def create_pod(self, pod: dict[str, Any]) -> None:
        threading.Thread(target=self._start_pod, args=(pod,), daemon=True).start()

    def _start_pod(self, pod: dict[str, Any]) -> None:
        namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        directory = self._root / f"{namespace}-{name}"
        record: dict[str, Any] = {"containers": {}, "dir": directory, "images": {}, "logs": {}, "limits": {}, "volumes": []}
        with self._lock:
            self._pods[(namespace, name)] = record
        volume_dirs = {}
        for volume in pod["spec"].get("volumes", []):
            path = directory / volume["name"]
            path.mkdir(parents=True)
            path.chmod(0o777)
            volume_dirs[volume["name"]] = path
        try:
            docker_volumes = {}
            for volume, size in shared_memory_volumes(pod).items():
                made = self._engine.client.volumes.create(
                    f"fake-{name}-{volume}", driver="local", labels={**pod["metadata"]["labels"], MANAGED: "true"},
                    driver_opts={"type": "tmpfs", "device": "tmpfs", "o": f"size={size},mode=0777,nosuid,nodev"})
                with self._lock:
                    record["volumes"].append(made)
                    deleted = bool(record.get("deleted"))
                if deleted:  # deleted meanwhile: delete_pod has missed this volume
                    self._remove_volumes(record)
                    return
                docker_volumes[volume] = made.name
            host_network = not self.network_policy_enforced
            for container in pod["spec"]["containers"]:
                spec = container_spec(pod, container, volume_dirs, self._pids, self.service_address)
                with self._lock:
                    if record.get("deleted"):
                        return
                started = self._start(spec, host_network, volume_mounts(container, docker_volumes))
                started.reload()
                with self._lock:
                    record["containers"][container["name"]] = started
                    record["images"][container["name"]] = started.attrs.get("Image", "")
                    record["logs"][container["name"]] = started.attrs.get("LogPath", "")
                    record["limits"][container["name"]] = container["resources"]["limits"].get("ephemeral-storage", "")
                    deleted = bool(record.get("deleted"))
                if deleted:  # deleted while this container started: delete_pod has missed it and the volumes it uses
                    self._engine.remove(started)
                    self._remove_volumes(record)
                    break
        except Exception as exc:  # the fake reports what a kubelet would: the Pod failed
            log.warning("fake kubelet could not start %s: %s", name, exc)
            self._store.update("Pod", namespace, name, lambda p, m=str(exc): p["status"].update(phase="Failed", message=m))

    def _start(self, spec: ContainerSpec, host_network: bool, volumes: list[Mount]) -> Any:
        """Start spec's container with the shared volumes' mounts, pulling an image of a loopback registry first when the
        engine lacks it."""
        registry = spec.image.partition("/")[0]
        if registry.startswith(("127.0.0.1:", "localhost:")) and not self._has_image(spec.image):
            self._engine.client.images.pull(spec.image)
        kwargs = to_docker_kwargs(spec)
        kwargs["mounts"] = [*kwargs["mounts"], *volumes]
        if host_network:
            kwargs.pop("network_disabled", None)
            kwargs.pop("hostname", None)  # the engine refuses a hostname in the host's network namespace
            kwargs["network_mode"] = "host"
        container = self._engine.client.containers.create(**kwargs)
        try:
            container.start()
        except Exception:
            self._engine.remove(container)
            raise
        return container

    def _has_image(self, reference: str) -> bool:
        try:
            self._engine.client.images.get(reference)
        except Exception:
            return False
        return True

    def evict(self, namespace: str, name: str, message: str) -> None:
        """Evict Pod name as a kubelet does: kill its containers, then phase Failed, reason Evicted, message."""
        with self._lock:
            record = self._pods.get((namespace, name))
            if record is None or record.get("evicted"):
                return
            record["evicted"] = True
            containers = list(record["containers"].values())
        self.evictions.append((name, message))
        for container in containers:
            self._engine.kill(container)
        self._store.update("Pod", namespace, name, lambda p: p["status"].update(phase="Failed", reason="Evicted", message=message))

    def _storage_check(self, namespace: str, name: str, logs: dict[str, str], limits: dict[str, str]) -> None:
        for container, path in logs.items():
            if not path or not limits.get(container):
                continue
            try:
                used = os.path.getsize(path)
            except OSError:
                continue
            if used > _bytes(limits[container]):
                self.evict(namespace, name, f'Container {container} exceeded its local ephemeral storage limit "{limits[container]}". ')
                return

    def delete_pod(self, pod: dict[str, Any]) -> None:
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        with self._lock:
            record = self._pods.pop(key, None)
            if record is None:
                return
            record["deleted"] = True
            containers = list(record["containers"].values())
        for container in containers:
            self._engine.remove(container)
        self._remove_volumes(record)
        shutil.rmtree(record["dir"], ignore_errors=True)

    def _remove_volumes(self, record: dict[str, Any]) -> None:
        """Remove the Pod's shared volumes (after its containers); a Pod still starting removes what it made later."""
        with self._lock:
            volumes, record["volumes"] = record["volumes"], []
        for volume in volumes:
            try:
                volume.remove(force=True)
            except Exception as exc:
                log.warning("fake kubelet could not remove volume %s: %s", volume.name, exc)

    # status ------------------------------------------------------------------------

    def _monitor_loop(self) -> None:
        while not self._closed.wait(0.1):
            with self._lock:
                pods = [(key, dict(record["containers"]), dict(record["images"]), dict(record["logs"]), dict(record["limits"]))
                        for key, record in self._pods.items() if not record.get("evicted")]
            for (namespace, name), containers, images, logs, limits in pods:
                pod = self._store.get("Pod", namespace, name)
                if pod is None or len(containers) < len(pod["spec"]["containers"]):
                    continue
                self._storage_check(namespace, name, logs, limits)
                with self._lock:
                    if (self._pods.get((namespace, name)) or {}).get("evicted"):
                        continue
                statuses = [self._status_of(c["name"], c["image"], containers[c["name"]], images[c["name"]])
                            for c in pod["spec"]["containers"]]
                phase = self._phase(statuses)
                if statuses != pod["status"].get("containerStatuses") or phase != pod["status"].get("phase"):
                    self._store.update("Pod", namespace, name,
                                       lambda p, s=statuses, ph=phase: p["status"].update(phase=ph, containerStatuses=s))

    def _status_of(self, name: str, image: str, container: Any, image_id: str) -> dict[str, Any]:
        try:
            container.reload()
            state = container.attrs["State"]
        except Exception:  # removed under our feet: the Pod is being deleted
            state = {"Running": False, "ExitCode": 137, "OOMKilled": False}
        status: dict[str, Any] = {"name": name, "image": image, "imageID": image_id, "containerID": f"docker://{container.id}",
                                  "restartCount": 0, "ready": bool(state.get("Running"))}
        if state.get("Running"):
            status["state"] = {"running": {"startedAt": state.get("StartedAt", "")[:19] + "Z"}}
        else:
            code = state.get("ExitCode", 0)
            reason = "OOMKilled" if state.get("OOMKilled") else ("Completed" if code == 0 else "Error")
            status["state"] = {"terminated": {"exitCode": code, "reason": reason}}
        return status

    @staticmethod
    def _phase(statuses: list[dict[str, Any]]) -> str:
        terminated = [s["state"]["terminated"] for s in statuses if "terminated" in s["state"]]
        if len(terminated) < len(statuses):
            return "Running"
        return "Succeeded" if all(t["exitCode"] == 0 for t in terminated) else "Failed"

    # streams -------------------------------------------------------------------------

    def _container(self, namespace: str, name: str, container: str) -> Any:
        with self._lock:
            record = self._pods.get((namespace, name))
            return None if record is None else record["containers"].get(container)

    def open_exec(self, namespace: str, name: str, container: str, command: list[str]) -> _Exec | None:
        found = self._container(namespace, name, container)
        if found is None:
            return None
        self.execs.append((name, container, tuple(command)))
        return _Exec(self._engine, found.id, command)

    def logs(self, namespace: str, name: str, container: str, tail: int) -> str | None:
        found = self._container(namespace, name, container)
        if found is None:
            return None
        return found.logs(stdout=True, stderr=True, tail=tail).decode("utf-8", "replace")

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            pods = list(self._pods.values())
            self._pods.clear()
        for record in pods:
            for container in record["containers"].values():
                self._engine.remove(container)
            self._remove_volumes(record)
        shutil.rmtree(self._root, ignore_errors=True)
