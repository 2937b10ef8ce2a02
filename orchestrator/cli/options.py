"""CLI options used by more than one command, declared once.

Everything a command's signature names is imported by `--help`: this module and the command modules import at
their top only what is cheap (typer, rich, the standard library, pure modules); the engine's client, grpc, pydantic
and the layers that use them are imported inside the command functions.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal, Optional

import typer

if TYPE_CHECKING:
    from orchestrator.run.relay_setup import CredentialGrant

Environments = Annotated[
    Optional[list[Path]],
    typer.Option("--environments", help="Extra directory of environment packages (repeatable).", show_default=False),
]
def _base_choice(value: str) -> str:
    """value, checked as `orchestrator.images.base.choice_for` reads it. Raises typer.BadParameter naming the fault."""
    if value in ("auto", "debootstrap"):
        return value
    from orchestrator.images.base import PYTHONS, choice_for  # with docker-py: loaded only for another value

    try:
        for python in PYTHONS:
            choice_for(value, python)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--base") from None
    return value


Base = Annotated[
    str,
    typer.Option("--base", callback=_base_choice,
                 help="Base image: auto (local or pulled python:3.11-slim, or python:3.13-slim for the Python 3.13 images, else a "
                      "Debian bookworm or trixie bootstrap), debootstrap, an image (the Python 3.11 base alone), or 3.11=CHOICE,3.13=CHOICE."),
]
Scope = Annotated[
    str,
    typer.Option("--scope", envvar="EPG_SCOPE", help="Tag every container with this scope label.", hidden=True),
]


Json = Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout (progress and errors stay on stderr).")]
OutputDir = Annotated[
    Optional[Path],
    typer.Option("--output", "-o", "--out", help="Directory the command writes its records to.", show_default=False),
]


AllowCredential = Annotated[
    Optional[list[str]],
    typer.Option(
        "--allow-credential", metavar="NAME@HOST",
        help="Let the spec's relay send the credential NAME (a Host environment variable, codex-login or claude-login) "
        "to HOST or HOST:PORT (repeatable). Without it a credential goes only to its provider's own host over https.",
        show_default=False,
    ),
]


def credential_grants(values: list[str] | None) -> list[CredentialGrant]:
    """The --allow-credential values as `relay_setup.CredentialGrant`s. Raises typer.BadParameter for a malformed one."""
    from orchestrator.run.relay_setup import parse_grant  # with the relay's HTTP client: loaded by the commands that use it

    grants = []
    for value in values or ():
        try:
            grants.append(parse_grant(value))
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--allow-credential") from None
    return grants


def environment_roots(extra: list[Path] | None) -> list[Path] | None:
    """The extra roots, then the bundled environments/ (installed distributions are always searched); None for the default alone.

    Raises typer.BadParameter for a root that is not a directory.
    """
    from orchestrator.images.catalogue import DEFAULT_ENVIRONMENTS  # with pydantic: loaded by the commands that use it

    for root in extra or ():
        if not root.is_dir():
            raise typer.BadParameter(f"{root} is not a directory", param_hint="--environments")
    return [*extra, DEFAULT_ENVIRONMENTS] if extra else None
Concurrency = Annotated[
    int, typer.Option("--concurrency", min=0, help="Episodes run at once (runner lanes); 0: one per CPU.")
]
PoolSize = Annotated[
    int, typer.Option("--pool-size", min=0, help="Policy containers kept pre-started (each used once).")
]
# backends.container_spec.ContainerRuntime, spelled out here so that no command's --help imports docker-py (a unit
# test keeps the two equal).
ContainerRuntime = Literal["runc", "runsc"]
Runtime = Annotated[
    ContainerRuntime,
    typer.Option("--runtime", help="OCI runtime of the policy containers: runc, or runsc (gVisor; scripts/ensure-docker.sh registers it)."),
]
# backends.settings.SandboxIsolation, spelled out for the same reason.
IsolationMode = Literal["container", "forked"]
Isolation = Annotated[
    IsolationMode,
    typer.Option("--isolation", help="How each Episode is isolated: container (a policy container of its own) or forked (a "
                 "sandbox of fresh namespaces forked in its lane's hardened container; Docker backend only)."),
]
Backend = Annotated[
    Literal["docker", "kubernetes"],
    typer.Option("--backend", help="Where Episodes run: the local Docker engine, or the Kubernetes cluster of --context/--namespace."),
]
KubeContext = Annotated[
    str, typer.Option("--context", help="kubeconfig context of --backend kubernetes ($KUBECONFIG or ~/.kube/config); empty: the current one."),
]
KubeNamespace = Annotated[str, typer.Option("--namespace", help="Namespace of --backend kubernetes.")]
RegistryPrefix = Annotated[
    str, typer.Option("--registry-prefix", help="Registry the cluster pulls the images from (HOST[:PORT], as `images push --registry`)."),
]
RuntimeClass = Annotated[str, typer.Option("--runtime-class", help="RuntimeClass of the Episode Pods (e.g. gvisor) with --backend kubernetes.")]
