"""The Docker engine wrapper: every container is created here, with labels; cleanup reaps by label."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import docker
from docker.errors import APIError, DockerException, ImageNotFound, NotFound
from docker.models.containers import Container

from epg_sdk.outcomes import ContainerExit
from orchestrator.backends.container_spec import ContainerSpec, to_docker_kwargs
from orchestrator.backends.labels import MANAGED
from orchestrator.kernel.infrastructure import InfraErrorCode, InfrastructureError

log = logging.getLogger(__name__)

ENGINE_HINT = "start one with `make docker` (scripts/ensure-docker.sh)"
REAP_WORKERS = 8  # containers removed at once by reap


@dataclass(slots=True)
class ReapReport:
    containers: int = 0
    networks: int = 0
    volumes: int = 0
    directories: int = 0  # work directories of dead processes (orchestrator.backends.workdirs)
    errors: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.containers + self.networks + self.volumes + self.directories


class DockerEngine:
    """A connected Docker engine."""

    def __init__(self, client: docker.DockerClient) -> None:
        self.client = client

    @classmethod
    def connect(cls, timeout_s: float = 30.0) -> DockerEngine:
        """Return an engine whose daemon answered a ping.

        Raises InfrastructureError(ENGINE_UNAVAILABLE) when none answers.
        """
        try:
            client = docker.from_env(timeout=int(timeout_s))
            client.ping()
        except (DockerException, OSError) as exc:
            raise InfrastructureError(
                InfraErrorCode.ENGINE_UNAVAILABLE, f"no Docker daemon answers; {ENGINE_HINT}", evidence=str(exc)
            ) from exc
        return cls(client)

    def image_exists(self, tag: str) -> bool:
        try:
            self.client.images.get(tag)
        except ImageNotFound:
            return False
        return True

    def image_labels(self, reference: str) -> tuple[str, dict[str, str]] | None:
        """Return (image id, labels) of the image reference (repo:tag or id) present in the engine, or None."""
        try:
            image = self.client.images.get(reference)
        except (ImageNotFound, APIError):
            return None
        if image.id is None:  # the engine answered without an id: not an image this code can name
            return None
        return image.id, dict(image.labels or {})

    def copy_from_image(self, image: str, path: str, labels: dict[str, str]) -> bytes:
        """Return a tar archive of path inside image, read from a created (never started) labelled container.

        Raises InfrastructureError: IMAGE_MISSING for an image the engine does not hold, CONTAINER_FAILED when the
        engine refuses or path is absent.
        """
        container = self._create(ContainerSpec(image=image, command=("true",), labels=labels))
        try:
            stream, _stat = container.get_archive(path)
            return b"".join(stream)
        except (NotFound, APIError) as exc:
            raise InfrastructureError(InfraErrorCode.CONTAINER_FAILED, f"cannot read {path} from {image}", str(exc)) from exc
        finally:
            if not self.remove(container):
                log.warning("leaked container %s of %s", container.short_id, image)

    def _create(self, spec: ContainerSpec) -> Container:
        """Create (not start) the container of spec: the one place the orchestrator creates containers.

        Raises ValueError for a spec without the orchestrator's labels, InfrastructureError: IMAGE_MISSING for an image
        the engine does not hold, CONTAINER_FAILED when the engine refuses.
        """
        if spec.labels.get(MANAGED) != "true":
            raise ValueError("every container the orchestrator creates must carry its labels")
        try:
            return self.client.containers.create(**to_docker_kwargs(spec))
        except ImageNotFound as exc:
            raise InfrastructureError(
                InfraErrorCode.IMAGE_MISSING, f"image {spec.image} is not built; run `epg-orchestrate images build`"
            ) from exc
        except APIError as exc:
            raise InfrastructureError(InfraErrorCode.CONTAINER_FAILED, f"cannot create a container of {spec.image}", str(exc)) from exc

    def start(self, spec: ContainerSpec) -> Container:
        """Create and start a container for spec; return it. Raises InfrastructureError (IMAGE_MISSING, CONTAINER_FAILED)."""
        container = self._create(spec)
        try:
            container.start()
        except APIError as exc:
            self.remove(container)
            raise InfrastructureError(InfraErrorCode.CONTAINER_FAILED, f"cannot start a container of {spec.image}", str(exc)) from exc
        return container

    def exit_of(self, container: Container, wait_s: float) -> ContainerExit:
        """Wait up to wait_s for the container to stop; return its exit status and OOM flag."""
        try:
            container.wait(timeout=wait_s)
        except (DockerException, OSError):
            pass  # still running after wait_s: reported as exit_code None below
        try:
            container.reload()
        except NotFound:
            return ContainerExit(exit_code=None)
        state = container.attrs.get("State", {})
        running = state.get("Running", False)
        return ContainerExit(exit_code=None if running else state.get("ExitCode"), oom_killed=bool(state.get("OOMKilled")))

    def state(self, container: Container) -> tuple[bool, int | None]:
        """Return (running, exit code) of container as the engine reports it now."""
        container.reload()
        running = container.status not in ("exited", "dead")
        return running, None if running else container.attrs["State"].get("ExitCode")

    def kill(self, container: Container) -> None:
        try:
            container.kill()
        except (NotFound, APIError) as exc:
            log.info("kill of %s: %s", container.short_id, exc)

    def logs(self, container: Container, *, stdout: bool, stderr: bool) -> bytes:
        return container.logs(stdout=stdout, stderr=stderr)

    def logs_tail(self, container: Container, max_bytes: int) -> bytes:
        try:
            return container.logs(stdout=True, stderr=True, tail=200)[-max_bytes:]
        except (DockerException, OSError) as exc:
            return f"<logs unavailable: {exc}>".encode()

    def remove(self, container: Container) -> bool:
        """Force-remove container; return False (and log why) when the engine refused."""
        try:
            container.remove(force=True, v=True)
        except NotFound:
            return True
        except APIError as exc:
            if "already in progress" in str(exc):
                return True
            log.warning("could not remove container %s: %s", container.short_id, exc)
            return False
        return True

    def reap(self, label_filters: list[str]) -> ReapReport:
        """Remove every container, network and volume matching all label_filters."""
        report = ReapReport()
        filters: dict[str, str | list[str] | bool] = {"label": label_filters}
        # sparse: no inspect per container, which would race with removals elsewhere
        containers = self.client.containers.list(all=True, filters=filters, sparse=True)
        # Removed side by side: each removal waits on the engine killing and unmounting one container (about 0.1 s),
        # and a sandbox closes with two or more per lane. Bounded below the client's connection pool (10).
        with ThreadPoolExecutor(max_workers=max(1, min(REAP_WORKERS, len(containers)))) as removing:
            for container, removed in zip(containers, removing.map(self.remove, containers), strict=True):
                if removed:
                    report.containers += 1
                else:
                    report.errors.append(f"container {container.short_id}")
        for network in self.client.networks.list(filters=filters):
            try:
                network.remove()
                report.networks += 1
            except APIError as exc:
                report.errors.append(f"network {network.name}: {exc}")
        for volume in self.client.volumes.list(filters=filters):
            try:
                volume.remove(force=True)
                report.volumes += 1
            except APIError as exc:
                report.errors.append(f"volume {volume.name}: {exc}")
        return report

    def owners(self, label_filters: list[str], owner_label: str) -> set[str]:
        """Return the owner label values of matching containers."""
        containers = self.client.containers.list(all=True, filters={"label": label_filters}, sparse=True)
        return {(c.attrs.get("Labels") or {}).get(owner_label, "") for c in containers}
