"""Images by digest: a Pod names REGISTRY/epg/NAME@sha256:..., never a tag that whoever can push may move.

The content tag (epg/NAME:HASH) hashes an image's inputs, not its bytes; in a
registry that tag is a mutable pointer. The sandbox resolves each registry
reference once, when it opens, with the registry's own HTTP API (a HEAD of the
manifest, whose `Docker-Content-Digest` is the digest a node pulls), and every
Pod of the sandbox names that digest: a tag moved during a Run changes
nothing, all its Episodes run one image, and the digest is what the cluster
reports back as the image id. A reference without a registry (the nodes hold
the local tags) is left as it is: there is no registry to move it.

Loopback registries are spoken to over HTTP (as the Docker engine does), any
other over HTTPS. Anonymous access and the bearer-token challenge are
handled, with the `auths` entry of the Docker client's config file
(`$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`) when it has one;
credential helpers are not asked.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Callable

import urllib3

from orchestrator.backends.settings import SandboxImages
from orchestrator.kernel.infrastructure import InfraErrorCode, InfrastructureError

Resolve = Callable[[str], str]

MANIFEST_TYPES = ", ".join([
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
])
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')
TIMEOUT_S = 30.0


def has_registry(reference: str) -> bool:
    """True when reference names a registry host (its first path component has a '.' or ':' or is localhost)."""
    first, slash, _ = reference.partition("/")
    return bool(slash) and ("." in first or ":" in first or first == "localhost")


def is_pinned(reference: str) -> bool:
    return "@sha256:" in reference


def split_reference(reference: str) -> tuple[str, str, str]:
    """(registry host, repository path, tag) of HOST/PATH[:TAG] (tag "latest" when there is none)."""
    host, _, rest = reference.partition("/")
    path, colon, tag = rest.rpartition(":")
    if not colon:
        return host, rest, "latest"
    return host, path, tag


def pin_images(images: SandboxImages, resolve: Resolve) -> SandboxImages:
    """images with every registry reference replaced by resolve(reference) (HOST/PATH@sha256:...)."""

    def pin(reference: str) -> str:
        return reference if is_pinned(reference) or not has_registry(reference) else resolve(reference)

    return SandboxImages(environment=pin(images.environment), policy_runtime=pin(images.policy_runtime),
                         benchmark_entry=images.benchmark_entry)


def _docker_auth(host: str) -> str | None:
    """The base64 user:password of host in the Docker client's config file, if it has one."""
    config = Path(os.environ.get("DOCKER_CONFIG") or Path.home() / ".docker") / "config.json"
    try:
        auths = json.loads(config.read_text()).get("auths") or {}
    except (OSError, ValueError, AttributeError):
        return None
    for key in (host, f"https://{host}", f"http://{host}"):
        entry = auths.get(key) or {}
        if isinstance(entry, dict) and entry.get("auth"):
            return str(entry["auth"])
    return None


def registry_resolver(http: urllib3.PoolManager | None = None) -> Resolve:
    """A Resolve asking the reference's registry for the digest of its tag. Its calls raise InfrastructureError
    (IMAGE_MISSING) when the registry does not answer, refuses, or lacks the tag."""
    pool = http or urllib3.PoolManager(timeout=urllib3.Timeout(total=TIMEOUT_S), retries=False)

    def resolve(reference: str) -> str:
        host, path, tag = split_reference(reference)
        loopback = host.split(":")[0] in ("127.0.0.1", "localhost", "[::1]")
        url = f"{'http' if loopback else 'https'}://{host}/v2/{path}/manifests/{tag}"
        headers = {"Accept": MANIFEST_TYPES}
        basic = _docker_auth(host)
        try:
            response = pool.request("HEAD", url, headers=headers)
            if response.status == 401:
                headers["Authorization"] = _authorization(pool, response.headers.get("WWW-Authenticate", ""), basic)
                response = pool.request("HEAD", url, headers=headers)
        except urllib3.exceptions.HTTPError as exc:
            raise InfrastructureError(InfraErrorCode.IMAGE_MISSING, f"the registry of {reference} did not answer", evidence=str(exc)) from exc
        digest = response.headers.get("Docker-Content-Digest", "")
        if response.status != 200 or not _DIGEST.match(digest):
            raise InfrastructureError(InfraErrorCode.IMAGE_MISSING, f"cannot resolve {reference} to a digest (registry answered "
                                      f"{response.status}); push the images first: `epg-orchestrate images push --registry {host}`")
        return f"{host}/{path}@{digest}"

    return resolve


def _authorization(pool: urllib3.PoolManager, challenge: str, basic: str | None) -> str:
    """The Authorization header answering a registry's WWW-Authenticate challenge (Basic, or a Bearer token)."""
    scheme, _, params = challenge.partition(" ")
    if scheme.lower() == "basic":
        return f"Basic {basic or ''}"
    fields = dict(_CHALLENGE.findall(params))
    if scheme.lower() != "bearer" or not fields.get("realm", "").startswith("https://"):
        raise urllib3.exceptions.HTTPError(f"unsupported registry challenge: {challenge[:200]}")
    query = {key: fields[key] for key in ("service", "scope") if key in fields}
    headers = {"Authorization": f"Basic {basic}"} if basic else {}
    response = pool.request("GET", fields["realm"], fields=query, headers=headers)
    try:
        document = json.loads(response.data)
        token = document.get("token") or document.get("access_token")
    except (ValueError, AttributeError):
        token = None
    if response.status != 200 or not token:
        raise urllib3.exceptions.HTTPError(f"the registry's token service answered {response.status}")
    return f"Bearer {token}"
