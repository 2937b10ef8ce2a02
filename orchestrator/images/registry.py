"""Push our images to a registry and pull them back under their local content tags."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping

import docker
from docker.errors import APIError, DockerException, ImageNotFound
from docker.models.images import Image

Progress = Callable[[str], None]

_REGISTRY = re.compile(r"^[A-Za-z0-9.-]+(:[0-9]{1,5})?$")


class RegistryError(Exception):
    """A push or pull failed: the registry did not answer, refused, or lacks the image. The message names it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Transfer:
    name: str
    tag: str  # local: epg/NAME:HASH
    remote: str  # HOST[:PORT]/epg/NAME:HASH
    image_id: str
    seconds: float


def check_registry(registry: str) -> str:
    """Return registry (HOST or HOST:PORT) unchanged; raise RegistryError for anything else (a scheme, a path)."""
    if not _REGISTRY.match(registry):
        raise RegistryError(f"--registry must be HOST or HOST:PORT, got {registry!r}")
    return registry


def remote_reference(registry: str, tag: str) -> str:
    """HOST[:PORT]/epg/NAME:HASH for the local tag epg/NAME:HASH."""
    return f"{check_registry(registry)}/{tag}"


def push(client: docker.DockerClient, registry: str, images: Iterable[tuple[str, str]], progress: Progress) -> list[Transfer]:
    """Push each (name, local tag) as HOST[:PORT]/TAG; the registry tag is removed locally afterwards.

    Raises RegistryError when an image is not built or the registry refuses it.
    """
    transfers = []
    for name, tag in images:
        started = time.monotonic()
        remote = remote_reference(registry, tag)
        try:
            image = client.images.get(tag)
        except ImageNotFound:
            raise RegistryError(f"{name}: {tag} is not built; run `epg-orchestrate images build {name}` first") from None
        repository, _, version = remote.rpartition(":")
        progress(f"{name}: pushing {remote}")
        try:
            image.tag(repository, version)
            try:
                _follow(client.api.push(repository, tag=version, stream=True, decode=True), name, progress)
            finally:
                client.images.remove(remote, noprune=True)
        except (APIError, DockerException) as exc:
            raise RegistryError(f"{name}: push to {registry} failed: {_first_line(exc)}") from exc
        transfers.append(Transfer(name=name, tag=tag, remote=remote, image_id=_image_id(image, name), seconds=time.monotonic() - started))
        progress(f"{name}: pushed in {time.monotonic() - started:.1f} s")
    return transfers


def pull(client: docker.DockerClient, registry: str, images: Iterable[tuple[str, str]], progress: Progress,
         expected_ids: Mapping[str, str] | None = None) -> list[Transfer]:
    """Pull HOST[:PORT]/TAG for each (name, local tag) and tag it TAG locally (the registry tag is removed).

    A registry's tag is mutable: whoever can write to the registry can put another image behind it. With
    expected_ids (name -> image id, as `push` reported them) a pulled image whose id is not the one pushed is
    removed again, untagged, and refused; the id is the digest of the image's configuration, which names every
    layer by its digest, so an image with that id is the image that was pushed.

    Raises RegistryError when the registry does not answer or lacks an image, or an image is not the one pushed.
    """
    transfers = []
    for name, tag in images:
        started = time.monotonic()
        remote = remote_reference(registry, tag)
        repository, _, version = remote.rpartition(":")
        if expected_ids is not None and name not in expected_ids:
            raise RegistryError(f"{name}: not among the images pushed (no id to check it against)")
        progress(f"{name}: pulling {remote}")
        try:
            _follow(client.api.pull(repository, tag=version, stream=True, decode=True), name, progress)
            image = client.images.get(remote)
            if expected_ids is not None and image.id != expected_ids[name]:
                client.images.remove(remote, noprune=False)
                raise RegistryError(f"{name}: {remote} is {image.id}, not the image pushed ({expected_ids[name]}): refused")
            local_repository, _, local_version = tag.rpartition(":")
            image.tag(local_repository, local_version)
            client.images.remove(remote, noprune=True)
        except (APIError, DockerException) as exc:
            raise RegistryError(f"{name}: pull of {remote} failed: {_first_line(exc)}") from exc
        transfers.append(Transfer(name=name, tag=tag, remote=remote, image_id=_image_id(image, name), seconds=time.monotonic() - started))
        progress(f"{name}: pulled in {time.monotonic() - started:.1f} s")
    return transfers


def _image_id(image: Image, name: str) -> str:
    """image's id (sha256:...). Raises RegistryError for an image the engine reported without one."""
    if image.id is None:
        raise RegistryError(f"{name}: the engine reported the image without an id")
    return image.id


def _follow(stream: Iterator[dict[str, Any]], name: str, progress: Progress) -> None:
    """Report a push or pull stream one layer event at a time; raise RegistryError for an error in it."""
    for event in stream:
        if "error" in event:
            detail = event.get("errorDetail", {}).get("message") or event["error"]
            raise RegistryError(f"{name}: {detail}")
        status = event.get("status", "")
        if status in ("Pushed", "Layer already exists", "Pull complete", "Already exists") or status.startswith("Digest:"):
            layer = event.get("id", "")
            progress(f"  {name}: {layer + ' ' if layer else ''}{status}")


def _first_line(exc: Exception) -> str:
    text = exc.explanation if isinstance(exc, APIError) and exc.explanation else str(exc)
    lines = str(text).strip().splitlines()
    return lines[0][:300] if lines else type(exc).__name__
