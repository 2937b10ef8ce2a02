"""`epg-orchestrate images build | list | prune | context | push | pull`."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, Optional

import typer
from rich.table import Table

from orchestrator.cli.common import ExitCode, err, fail, fail_infrastructure, json_mode, out, print_json
from orchestrator.cli.options import Base, Environments, Json, environment_roots
from orchestrator.kernel.infrastructure import InfrastructureError

if TYPE_CHECKING:
    from orchestrator.images.builder import ImageBuilder
    from orchestrator.images.registry import Transfer

app = typer.Typer(help="Build, list, push and pull the offline images.", no_args_is_help=True)

Names = Annotated[Optional[list[str]], typer.Argument(help="Images (default: all).", show_default=False)]
Registry = Annotated[str, typer.Option("--registry", help="Registry as HOST[:PORT]; images go to HOST[:PORT]/epg/NAME:TAG.", show_default=False)]


def _builder(base: str, environments: list[Path] | None) -> ImageBuilder:
    # The engine's client and the builder are loaded by the commands, not by --help.
    from orchestrator.backends.engine import DockerEngine
    from orchestrator.images.builder import ImageBuilder

    engine = DockerEngine.connect()
    return ImageBuilder(engine.client, base=base, environments=environment_roots(environments), progress=lambda m: err.print(m, highlight=False))


def _fail_from(exc: Exception) -> NoReturn:
    from orchestrator.images.registry import RegistryError

    if isinstance(exc, InfrastructureError):
        fail_infrastructure(exc)
    if isinstance(exc, RegistryError):
        fail(str(exc), ExitCode.INFRASTRUCTURE)
    fail(str(exc).strip("'\""))


def _failures() -> tuple[type[Exception], ...]:
    """What an images command turns into an error line (_fail_from) rather than a traceback."""
    from orchestrator.images.catalogue import CatalogueError
    from orchestrator.images.registry import RegistryError

    return InfrastructureError, KeyError, CatalogueError, RegistryError, FileExistsError


@app.command("build")
def build(names: Names = None, base: Base = "auto", environments: Environments = None, as_json: Json = False) -> None:
    """Build images whose inputs changed; an image with the same inputs is never rebuilt."""
    json_mode(as_json)
    try:
        results = _builder(base, environments).ensure(names or None)
    except _failures() as exc:
        _fail_from(exc)
    built = [r for r in results if r.built]
    if as_json:
        images = [{"name": r.name, "tag": r.tag, "id": r.image_id, "built": r.built, "seconds": round(r.seconds, 3)} for r in results]
        print_json({"images": images, "built": len(built), "up_to_date": len(results) - len(built)})
        return
    for result in results:
        out.print(f"{result.name:<28} {result.tag:<52} {'built' if result.built else 'up to date'}", highlight=False)
    out.print(f"{len(built)} built, {len(results) - len(built)} up to date")


@app.command("list")
def list_images(base: Base = "auto", environments: Environments = None, as_json: Json = False) -> None:
    """List every image of the catalogue with its content-hash tag, whether it is built and its size, then the disk
    all the built ones take together (each shared layer, such as the base, counted once)."""
    json_mode(as_json)
    try:
        from orchestrator.images.disk import disk_bytes

        builder = _builder(base, environments)
        statuses = builder.status(make_base=False)
        present = [s.tag for s in statuses if s.present]
        disk = disk_bytes(present, builder.client.api.history)
    except _failures() as exc:
        _fail_from(exc)
    if as_json:
        print_json({"images": [{"name": s.name, "tag": s.tag or None, "present": s.present, "pinned": s.pinned or None,
                                 "size_bytes": s.size_bytes} for s in statuses], "disk_bytes": disk})
        return
    table = Table()
    for column in ("image", "tag", "state", "size", "pinned"):
        table.add_column(column, justify="right" if column == "size" else "left")
    for status in statuses:
        state = "built" if status.present else "[yellow]missing[/]" if status.tag else "[yellow]no base image yet[/]"
        size = f"{status.size_bytes / 2**20:.0f} MiB" if status.present else "-"
        table.add_row(status.name, status.tag or "-", state, size, status.pinned or "-")
    out.print(table)
    out.print(f"{len(present)} built images take {disk / 2**20:.0f} MiB of disk together (each shared layer counted once; "
              "size: each image whole, its base and the layers it shares with others included)", highlight=False)


@app.command("prune")
def prune(base: Base = "auto", environments: Environments = None, as_json: Json = False) -> None:
    """Remove this checkout's images built from inputs that are no longer current.

    Kept, each listed with the reason: images of other checkouts on the same engine (branches, users),
    images without a checkout label, environment images of packages outside the catalogue (--environments), images in use.
    """
    json_mode(as_json)
    try:
        result = _builder(base, environments).prune()
    except _failures() as exc:
        _fail_from(exc)
    if as_json:
        print_json({"removed": result.removed, "kept": [{"image": kept.image, "reason": kept.reason} for kept in result.kept]})
        return
    for tag in result.removed:
        out.print(f"removed {tag}", highlight=False)
    for kept in result.kept:
        out.print(f"kept {kept.image}: {kept.reason}", highlight=False)
    out.print(f"{len(result.removed)} outdated images removed, {len(result.kept)} outdated images kept", highlight=False)


@app.command("context")
def context(
    name: Annotated[str, typer.Argument(help="The image, e.g. policy-runtime, env-cartpole, agent-codex.", show_default=False)],
    directory: Annotated[Path, typer.Argument(help="An empty or new directory.", show_default=False)],
    base: Base = "auto",
    environments: Environments = None,
    as_json: Json = False,
) -> None:
    """Write the build context the builder would use for NAME, and print the `docker build` command for it."""
    json_mode(as_json)
    try:
        written = _builder(base, environments).context(name, directory)
    except _failures() as exc:
        _fail_from(exc)
    args = " ".join(f"--build-arg {key}={shlex.quote(value)}" for key, value in written.build_args.items())
    command = f"docker build {args} -t {written.tag} {shlex.quote(str(directory))}"
    if as_json:
        print_json({"name": written.name, "tag": written.tag, "directory": str(directory), "build_args": written.build_args, "command": command})
        return
    out.print(command, highlight=False, soft_wrap=True)


def _transfer_json(registry: str, transfers: list[Transfer]) -> dict[str, Any]:
    images = [{"name": t.name, "tag": t.tag, "remote": t.remote, "id": t.image_id, "seconds": round(t.seconds, 3)} for t in transfers]
    return {"registry": registry, "images": images}


def _print_transfers(verb: str, transfers: list[Transfer]) -> None:
    for transfer in transfers:
        out.print(f"{transfer.name:<28} {transfer.remote:<64} {verb}", highlight=False)
    out.print(f"{len(transfers)} {verb}")


@app.command("push")
def push(registry: Registry, names: Names = None, base: Base = "auto", environments: Environments = None, as_json: Json = False) -> None:
    """Push built images as HOST[:PORT]/epg/NAME:TAG (a bootstrapped base image too, so `pull` elsewhere finds the same tags)."""
    from orchestrator.images import registry as registries

    json_mode(as_json)
    try:
        registries.check_registry(registry)
        builder = _builder(base, environments)
        bases = builder.base_tags(names or None)  # one per Python the images use
        wanted = bases + [(status.name, status.tag) for status in builder.status(names or None)]
        transfers = registries.push(builder.client, registry, wanted, lambda m: err.print(m, highlight=False))
    except _failures() as exc:
        _fail_from(exc)
    if as_json:
        print_json(_transfer_json(registry, transfers))
    else:
        _print_transfers("pushed", transfers)


Pushed = Annotated[Optional[Path], typer.Option(
    "--pushed", help="The `images push --json` output of the push: each pulled image must have the id pushed, "
    "whatever the registry's tag now names.", exists=True, dir_okay=False, show_default=False)]


@app.command("pull")
def pull(registry: Registry, names: Names = None, base: Base = "auto", environments: Environments = None,
         pushed: Pushed = None, as_json: Json = False) -> None:
    """Pull images pushed by `images push` and tag them epg/NAME:TAG, so `images build` finds them up to date.

    A registry's tags can be moved by whoever writes to it: with --pushed an image that is not the one pushed is
    refused (exit 3).
    """
    from orchestrator.images import registry as registries

    json_mode(as_json)
    def progress(message: str) -> None:
        err.print(message, highlight=False)

    expected = _pushed_ids(pushed) if pushed is not None else None
    if expected is None:
        progress("pulling by tag: give --pushed FILE (the push's --json output) to check each image is the one pushed")
    try:
        registries.check_registry(registry)
        builder = _builder(base, environments)
        transfers = []
        for base_name, base_tag in builder.base_tags(names or None):  # the tags below depend on their Python's base
            if not builder.has_image(base_tag):
                transfers += registries.pull(builder.client, registry, [(base_name, base_tag)], progress, expected)
        wanted = [(status.name, status.tag) for status in builder.status(names or None)]
        transfers += registries.pull(builder.client, registry, wanted, progress, expected)
    except _failures() as exc:
        _fail_from(exc)
    if as_json:
        print_json(_transfer_json(registry, transfers))
    else:
        _print_transfers("pulled", transfers)


MAX_PUSHED_BYTES = 1 << 20
IMAGE_ID = re.compile(r"^sha256:[0-9a-f]{64}$")


def _pushed_ids(path: Path) -> dict[str, str]:
    """name -> image id from an `images push --json` output file; exits 1 naming what is wrong with it."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_PUSHED_BYTES + 1)
        if len(data) > MAX_PUSHED_BYTES:
            raise ValueError(f"over {MAX_PUSHED_BYTES} bytes")
        document = json.loads(data)
        ids = {str(entry["name"]): str(entry["id"]) for entry in document["images"]}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        fail(f"--pushed {path}: not the output of `images push --json` ({type(exc).__name__}: {exc})")
    if not all(IMAGE_ID.match(image_id) for image_id in ids.values()):
        fail(f"--pushed {path}: an image id is not sha256:<64 hex digits>")
    return ids
