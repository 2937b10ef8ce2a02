"""Build images offline: wheels come from the host's pip, Debian packages from its apt, tags from a hash of every input."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

import docker
from docker.errors import APIError, ImageNotFound

from orchestrator.backends.container_spec import ContainerSpec
from orchestrator.backends.engine import DockerEngine
from orchestrator.backends.labels import BENCHMARKS, CHECKOUT, CLI, IMAGE, INPUTS, MANAGED, PACKAGE, sandbox_labels
from orchestrator.images.base import choice_for, ensure_base, kind_of, local_base, planned_bootstrap_tag
from orchestrator.images.catalogue import (
    REPO_ROOT,
    CatalogueError,
    EnvironmentPackage,
    discover,
    discovered_label,
    label_benchmarks,
    parse_discovered,
    with_discovered,
)
from orchestrator.images.debian import AptCache, DebianPackage, HostApt, SuiteApt, download, installed_in_image, resolve
from orchestrator.images.ownership import Ledger, path_id, reason_to_keep
from orchestrator.images.recipes import (
    DEFAULT_PYTHON,
    ENVIRONMENT_DOCKERFILE,
    PYTHON_SUFFIXES,
    ImageRecipe,
    NpmBinary,
    agent_base_recipe,
    cli_agent_recipes,
    environment_recipe,
    policy_runtime_name,
    policy_runtime_recipe,
    sdk_layer_recipe,
)
from orchestrator.kernel.infrastructure import InfraErrorCode, InfrastructureError

Progress = Callable[[str], None]
TARGET_PYTHON = DEFAULT_PYTHON
# The glibc of each Python's Debian base (bookworm 2.36, trixie 2.41): the newest manylinux wheels its images accept.
GLIBC_MINOR = {"3.11": 36, "3.13": 41}
DISCOVERY_TIMEOUT_S = 300.0


def default_cache_dir() -> Path:
    """$XDG_CACHE_HOME/epg-orchestrator, or ~/.cache/epg-orchestrator."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "epg-orchestrator"


def platform_tags(machine: str | None = None, python: str = DEFAULT_PYTHON) -> list[str]:
    """Wheel platform tags an image of python on this architecture accepts: bookworm's glibc 2.36 for 3.11, trixie's
    2.41 for 3.13."""
    arch = machine or platform.machine()
    newest = GLIBC_MINOR[python]
    minors = [minor for minor in (41, 40, 39, 38, 37, 36, 35, 34, 31, 28, 27, 17) if minor <= newest]
    return [f"manylinux_2_{minor}_{arch}" for minor in minors] + [f"manylinux2014_{arch}", f"linux_{arch}"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ImageStatus:
    name: str
    tag: str
    present: bool
    pinned: str = ""  # e.g. the CLI and its version in an agent image
    size_bytes: int = 0  # the image's size as the engine reports it (its shared layers included); 0 when absent


@dataclass(frozen=True, slots=True, kw_only=True)
class BuildResult:
    name: str
    tag: str
    image_id: str
    built: bool  # False: an image with these inputs existed already
    seconds: float


@dataclass(frozen=True, slots=True, kw_only=True)
class KeptImage:
    """An outdated managed image `images prune` left in place, and why."""

    image: str  # its tags, or its short id when it has none
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PruneResult:
    removed: list[str]  # tags (or short ids) of the images removed
    kept: list[KeptImage]


@dataclass(frozen=True, slots=True, kw_only=True)
class BuildContext:
    """A build context written to a directory, and the build args `docker build` needs for it."""

    name: str
    tag: str  # the tag the builder gives the image built from it
    directory: Path
    build_args: dict[str, str]  # BASE and the recipe's own


class ImageBuilder:
    """Plans and builds the images of the catalogue against one base image."""

    def __init__(
        self,
        client: docker.DockerClient,
        *,
        base: str = "auto",
        cache_dir: Path | None = None,
        environments: list[Path] | None = None,
        progress: Progress = lambda message: None,
        apt: AptCache | None = None,
        checkout: Path = REPO_ROOT,
    ) -> None:
        """apt answers the questions that resolve Debian packages (default: the host's apt-cache); checkout is the
        directory whose hash labels every image built (CHECKOUT) and bounds what prune removes (default: this checkout);
        the tags it finds current are recorded for the prunes of other checkouts in cache_dir/checkouts/."""
        self._client = client
        self._checkout = path_id(checkout)
        self._package_ids: dict[str, str] = {}  # environment image name -> PACKAGE label value
        self._base_choice = base
        self._cache = cache_dir or default_cache_dir()
        self._ledger = Ledger(self._cache / "checkouts", checkout)
        self._environments = environments
        self._progress = progress
        self._base_ids: dict[str, str] = {}  # Python -> its base image's id
        self._recipes: dict[str, ImageRecipe] | None = None
        self._packages: list[EnvironmentPackage] | None = None
        # apt per Python: the host's (bookworm's lists) for 3.11, trixie's lists in the cache for 3.13
        self._apts: dict[str, AptCache] = {DEFAULT_PYTHON: apt or HostApt()}
        self._installed: dict[str, frozenset[str]] = {}  # base image -> its Debian packages
        self._debs: dict[tuple[str, tuple[str, ...]], tuple[DebianPackage, ...]] = {}  # (base, names) -> resolved

    # catalogue -------------------------------------------------------------------

    def packages(self) -> list[EnvironmentPackage]:
        """The catalogue's packages; an EvoPolicyGym package with the Benchmarks its built image's label names (none
        while its image, or its base, is not built: nothing is built or bootstrapped here)."""
        found = self._catalogue()
        if not any(package.evopolicygym is not None for package in found):
            return found
        return [self._with_image_benchmarks(package) if package.evopolicygym is not None else package for package in found]

    def _catalogue(self) -> list[EnvironmentPackage]:
        if self._packages is None:
            self._packages = discover(self._environments)
        return self._packages

    def _with_image_benchmarks(self, package: EnvironmentPackage) -> EnvironmentPackage:
        recipe = self.recipes()[package.image]
        if self._local_base(recipe.python) is None:
            return package
        try:
            labels = self._client.images.get(self.tag_of(recipe)).labels or {}
        except ImageNotFound:
            return package
        return with_discovered(package, label_benchmarks(labels.get(BENCHMARKS, "")))

    def policy_image_for(self, environment_image: str) -> str:
        """The policy runtime image (name) for Programs evaluated on environment_image, an image given as it is: that of
        the Python of the catalogue's recipe its image label names (policy-runtime-py313 for a Python 3.13 one), else
        policy-runtime."""
        try:
            labels = self._client.images.get(environment_image).labels or {}
        except ImageNotFound:
            labels = {}
        recipe = self.recipes().get(labels.get(IMAGE, ""))
        return policy_runtime_name(recipe.python if recipe is not None else DEFAULT_PYTHON)

    def _local_base(self, python: str) -> str | None:
        if python not in self._base_ids:
            found = local_base(self._client, self._base_choice, python=python)
            if found is None:
                return None
            self._base_ids[python] = found
        return self._base_ids[python]

    def recipes(self) -> dict[str, ImageRecipe]:
        """Every image of the catalogue by name (read once per builder): the Python 3.11 and 3.13 policy runtimes and
        SDK layers, the agent images and one image per environment package."""
        if self._recipes is None:
            recipes = {}
            for python in PYTHON_SUFFIXES:
                for recipe in (policy_runtime_recipe(python), sdk_layer_recipe(python)):
                    recipes[recipe.name] = recipe
            recipes["agent-base"] = agent_base_recipe()
            recipes.update({recipe.name: recipe for recipe in cli_agent_recipes()})
            built_in = set(recipes)
            for package in self._catalogue():
                if package.image in built_in:
                    raise CatalogueError(f"{package.root / 'pyproject.toml'}: tool.epg.image: {package.image} is the name of a built-in image")
                recipes[package.image] = environment_recipe(package)
                self._package_ids[package.image] = path_id(package.root)
            # The default Python's images first: a build of every image that fails on another Python's has built them.
            self._recipes = dict(sorted(recipes.items(), key=lambda item: item[1].python != DEFAULT_PYTHON))
        return self._recipes

    def base_id(self, python: str = DEFAULT_PYTHON) -> str:
        """The id of python's base image, made (pulled or bootstrapped) when missing. Raises InfrastructureError."""
        if python not in self._base_ids:
            self._base_ids[python] = ensure_base(self._client, self._base_choice, self._progress, python=python)
        return self._base_ids[python]

    def base_tag(self, python: str = DEFAULT_PYTHON) -> str | None:
        """The deterministic tag of python's bootstrapped base when this builder's base is (or will be) one; else None."""
        return planned_bootstrap_tag(self._client, self._base_choice, python=python)

    def base_tags(self, names: list[str] | None = None) -> list[tuple[str, str]]:
        """(name, tag) of the bootstrapped bases the named images (default: all) are built on, one per Python they use:
        ("base", epg/base:bookworm-HASH), ("base-py313", epg/base:trixie-HASH). A base that is not a bootstrapped one (a
        local or pulled python:3.X-slim, an image) is left out. Raises KeyError for an unknown name."""
        pythons = {recipe.python for recipe in self._select(names)}
        found = ((f"base{suffix}", self.base_tag(python)) for python, suffix in PYTHON_SUFFIXES.items() if python in pythons)
        return [(name, tag) for name, tag in found if tag is not None]

    def tag_of(self, recipe: ImageRecipe) -> str:
        """The content tag of recipe: over its inputs and its base (the parent's tag, or the base image id)."""
        return self.resolved(recipe).tag(self._base_input(recipe))

    def resolved(self, recipe: ImageRecipe) -> ImageRecipe:
        """recipe with debian_files set to the .deb files of its Debian packages on its base (itself without any)."""
        if not recipe.debian:
            return recipe
        return replace(recipe, debian_files=tuple(package.filename for package in self.debian_packages(recipe)))

    def debian_packages(self, recipe: ImageRecipe) -> tuple[DebianPackage, ...]:
        """The packages dpkg installs for recipe.debian: their Depends closure, minus what the base image has, at the host's candidate versions.

        The base image, not the parent: the images between (env-sdk) install no Debian package, and the tag of a
        recipe whose parent is not built yet is known all the same. Resolved once per base, list and state of the
        host's apt lists: kept in the cache (debs/resolved.json), so that a command that only needs the tag pays no
        apt-cache call and no container. Raises InfrastructureError(IMAGE_BUILD_FAILED).
        """
        if not recipe.debian:
            return ()
        base = self.base_id(recipe.python)
        key = (base, recipe.debian)
        if key not in self._debs:
            apt = self._apt_of(recipe.python)
            stored = _ResolvedDebs(self._cache / "debs" / "resolved.json", apt.fingerprint())
            found = stored.get(base, recipe.debian)
            if found is None:
                if base not in self._installed:
                    self._installed[base] = installed_in_image(DockerEngine(self._client), base, {MANAGED: "true", IMAGE: recipe.name})
                found = resolve(recipe.debian, self._installed[base], apt)
                stored.put(base, recipe.debian, found)
            self._debs[key] = found
        return self._debs[key]

    def _apt_of(self, python: str) -> AptCache:
        """The apt that answers for the Debian suite of python's base (made on first use)."""
        if python not in self._apts:
            suite = kind_of(python).suite
            self._apts[python] = SuiteApt(suite, self._cache / "apt" / suite)
        return self._apts[python]

    def _base_input(self, recipe: ImageRecipe) -> str:
        if recipe.parent is None:
            return self.base_id(recipe.python)
        return self.tag_of(self.recipes()[recipe.parent])

    def status(self, names: list[str] | None = None, *, make_base: bool = True) -> list[ImageStatus]:
        """Return the tag of each image and whether it is present.

        The tags depend on the base image's id: without make_base, a base the
        engine lacks is not made, and every image is listed with tag "" and not present.
        """
        statuses = []
        for recipe in self._select(names):
            if not make_base and self._local_base(recipe.python) is None:
                statuses.append(ImageStatus(name=recipe.name, tag="", present=False, pinned=recipe.labels.get(CLI, "")))
                continue
            tag = self.tag_of(recipe)
            pinned = recipe.labels.get(CLI, "")
            size = self._image_size(tag)
            statuses.append(ImageStatus(name=recipe.name, tag=tag, present=size is not None, pinned=pinned, size_bytes=size or 0))
        self._ledger.record({status.name: status.tag for status in statuses if status.tag})
        return statuses

    def _select(self, names: list[str] | None) -> list[ImageRecipe]:
        """The named recipes; without names every recipe whose Python the base choice gives a base (`--base IMAGE`
        names the 3.11 base alone: the images of Python 3.13 are then left out rather than refused)."""
        recipes = self.recipes()
        if not names:
            return [recipe for recipe in recipes.values() if choice_for(self._base_choice, recipe.python)]
        unknown = [n for n in names if n not in recipes]
        if unknown:
            raise KeyError(f"unknown image {', '.join(unknown)}; known: {', '.join(recipes)}")
        return [recipes[n] for n in names]

    @property
    def client(self) -> docker.DockerClient:
        return self._client

    def has_image(self, tag: str) -> bool:
        """Whether the engine holds an image under tag."""
        return self._image_id(tag) is not None

    def _image_size(self, tag: str) -> int | None:
        try:
            return int(self._client.images.get(tag).attrs.get("Size") or 0)
        except ImageNotFound:
            return None

    def _image_id(self, tag: str) -> str | None:
        try:
            return self._client.images.get(tag).id
        except ImageNotFound:
            return None

    def prune(self) -> PruneResult:
        """Remove this checkout's images whose inputs are outdated (not a current tag, not the current base).

        An outdated image is kept, with the reason, when another checkout built it, when it carries no checkout
        label, when another checkout of this user last found its tag current (the Ledger), when it was built from an
        environment package outside this catalogue, or when the engine refuses (a container uses it, another
        repository tag names it).
        """
        self.base_id()  # the default Python's base is made, as always; another's only counts when present
        statuses = self.status(make_base=False)
        current = {status.tag for status in statuses}
        unknown = {status.name for status in statuses if not status.tag}  # their Python's base is absent: tags unknown
        bases = {found for found in (self._local_base(python) for python in PYTHON_SUFFIXES) if found}
        packages = set(self._package_ids.values())
        elsewhere = self._ledger.used_elsewhere()
        removed: list[str] = []
        kept: list[KeptImage] = []
        for image in self._client.images.list(filters={"label": f"{MANAGED}=true"}):
            if image.id is None or image.id in bases or any(tag in current for tag in image.tags):
                continue  # (the engine lists every image with its id: None is only the stubs' Optional)
            name = ", ".join(image.tags) or image.short_id
            reason = reason_to_keep(image.labels, image.tags, checkout=self._checkout, packages=packages, elsewhere=elsewhere)
            if reason is None and (image.labels or {}).get(IMAGE) in unknown:
                reason = "the base image of its Python is not present, so its current tag is not known"
            if reason is None:
                try:
                    self._client.images.remove(image.id, force=False)
                except APIError as exc:  # in use by a container, or named by another tag: keep it, say why
                    reason = f"the engine refused: {str(exc)[:160]}"
            if reason is not None:
                self._progress(f"kept {name}: {reason}")
                kept.append(KeptImage(image=name, reason=reason))
            else:
                removed.extend(image.tags or [image.short_id])
        return PruneResult(removed=removed, kept=kept)

    # building ------------------------------------------------------------------

    def ensure(self, names: list[str] | None = None) -> list[BuildResult]:
        """Build each named image (default: all) whose inputs have no image yet."""
        results = [self.build(recipe) for recipe in self._select(names)]
        self._ledger.record({result.name: result.tag for result in results})
        return results

    def build(self, recipe: ImageRecipe) -> BuildResult:
        """Build recipe's image unless one with its tag exists (its parent first). Raises InfrastructureError.

        An image found under its tag needs no parent image: the tag is computed from the parent's tag, and the
        image holds the parent's layers (as after `images pull` of an environment image alone).
        """
        started = time.monotonic()
        recipe = self.resolved(recipe)
        base_input = self._base_input(recipe)
        digest = recipe.inputs_hash(base_input)
        tag = recipe.tag(base_input)
        found = self._image_id(tag)
        if found is not None:
            self._progress(f"{recipe.name}: up to date ({tag})")
            return BuildResult(name=recipe.name, tag=tag, image_id=found, built=False, seconds=time.monotonic() - started)
        if recipe.parent is not None:
            self.build(self.recipes()[recipe.parent])
        self._progress(f"{recipe.name}: building {tag}")
        labels = {MANAGED: "true", IMAGE: recipe.name, INPUTS: digest, CHECKOUT: self._checkout, **recipe.labels}
        if recipe.name in self._package_ids:
            labels[PACKAGE] = self._package_ids[recipe.name]
        # An image whose Benchmarks are discovered is built under a provisional tag first: only the labelled image
        # carries the tag, so a failed discovery leaves nothing that looks up to date.
        built_as = f"{tag}-undiscovered" if recipe.discover or recipe.environment else tag
        with tempfile.TemporaryDirectory(prefix=f"epg-build-{recipe.name}-") as tmp:
            context = self.write_context(recipe, Path(tmp))
            self._docker_build(context.directory, built_as, context.build_args, labels)
        if built_as != tag:
            self._finish(recipe, built_as, tag)
        image_id = self._image_id(tag) or ""
        self._progress(f"{recipe.name}: built {tag} in {time.monotonic() - started:.0f} s")
        return BuildResult(name=recipe.name, tag=tag, image_id=image_id, built=True, seconds=time.monotonic() - started)

    def _finish(self, recipe: ImageRecipe, provisional: str, tag: str) -> None:
        """Give tag to the provisional image plus a last layer: recipe's environment variables, and the benchmarks label
        of the Benchmarks its discovery command finds in it. The provisional tag is removed. Raises InfrastructureError."""
        lines = ["ARG BASE", "FROM ${BASE}", *(f"ENV {key}={json.dumps(value)}" for key, value in sorted(recipe.environment.items()))]
        try:
            labels = {BENCHMARKS: self._discovered(recipe, provisional)} if recipe.discover else {}
            with tempfile.TemporaryDirectory(prefix=f"epg-finish-{recipe.name}-") as tmp:
                (Path(tmp) / "Dockerfile").write_text("\n".join(lines) + "\n")
                self._docker_build(Path(tmp), tag, {"BASE": provisional}, labels)
        finally:  # a failed discovery leaves no image that looks up to date
            self._remove_tag(provisional)

    def _discovered(self, recipe: ImageRecipe, provisional: str) -> str:
        """The benchmarks label of the Benchmarks recipe's discovery command prints in the provisional image (run
        hardened: no network, read-only, not root; with the image's environment variables). Raises
        InfrastructureError(IMAGE_BUILD_FAILED) when it fails or prints no Benchmark."""
        engine = DockerEngine(self._client)
        container = engine.start(ContainerSpec(image=provisional, command=recipe.discover, memory_bytes=2 * 1024**3,
                                               pids_limit=256, labels={**sandbox_labels().for_role("discovery"), IMAGE: recipe.name},
                                               environment=dict(recipe.environment)))
        try:
            status = engine.exit_of(container, DISCOVERY_TIMEOUT_S)
            stdout = engine.logs(container, stdout=True, stderr=False).decode("utf-8", "replace")
            both = engine.logs(container, stdout=True, stderr=True).decode("utf-8", "replace")
        finally:
            engine.remove(container)
        command = " ".join(recipe.discover)
        if status.exit_code != 0:
            raise InfrastructureError(InfraErrorCode.IMAGE_BUILD_FAILED,
                                      f"{recipe.name}: `{command}` failed in the built image (exit {status.exit_code})", both[-4000:])
        try:
            benchmarks = parse_discovered(stdout)
        except CatalogueError as exc:
            raise InfrastructureError(InfraErrorCode.IMAGE_BUILD_FAILED, f"{recipe.name}: {exc}", both[-4000:]) from exc
        if not benchmarks:
            raise InfrastructureError(InfraErrorCode.IMAGE_BUILD_FAILED, f"{recipe.name}: `{command}` found no Benchmark", both[-4000:])
        self._progress(f"{recipe.name}: discovered {', '.join(b.id for b in benchmarks)}")
        return discovered_label(benchmarks)

    def _remove_tag(self, reference: str) -> None:
        try:
            self._client.images.remove(reference, noprune=True)
        except APIError as exc:  # in use: the tag stays, said so
            self._progress(f"could not remove the provisional tag {reference}: {str(exc)[:160]}")

    def context(self, name: str, directory: Path) -> BuildContext:
        """Write the build context of image name into directory (empty or new), as a build would use it.

        A parent image (agent-base for the CLI images) is built first when missing, since it is
        BASE. Raises KeyError (unknown name), FileExistsError (directory not empty), InfrastructureError.
        """
        (recipe,) = self._select([name])
        if directory.exists() and any(directory.iterdir()):
            raise FileExistsError(f"{directory} is not empty")
        if recipe.parent is not None:
            self.build(self.recipes()[recipe.parent])
        directory.mkdir(parents=True, exist_ok=True)
        return self.write_context(recipe, directory)

    def write_context(self, recipe: ImageRecipe, directory: Path) -> BuildContext:
        """Lay out recipe's build context in directory: Dockerfile, debs/, wheels/, lib/, bin/ and its context files.

        Raises CatalogueError for a file of the recipe that is no longer a regular file (a symbolic link put in its
        place after the recipe checked it), InfrastructureError."""
        recipe = self.resolved(recipe)
        shutil.copyfile(recipe.dockerfile, directory / "Dockerfile")
        if recipe.debian or recipe.dockerfile == ENVIRONMENT_DOCKERFILE:
            self._fetch_debs(recipe, directory / "debs")
        if recipe.requirements or recipe.no_deps_requirements or recipe.dockerfile == ENVIRONMENT_DOCKERFILE:
            wheels = directory / "wheels"
            wheels.mkdir()
            (wheels / "requirements.txt").write_text("".join(f"{r}\n" for r in recipe.requirements))
            wheel_pins = tuple(r for r in recipe.requirements if r not in recipe.source_builds)
            if wheel_pins:
                self._fetch_wheels(wheel_pins, wheels, python=recipe.python)
            for pin in recipe.source_builds:
                self._build_pure_wheel(pin, wheels)
            if recipe.no_deps_requirements:
                (wheels / "requirements-nodeps.txt").write_text("\n".join(recipe.no_deps_requirements) + "\n")
                self._fetch_wheels(recipe.no_deps_requirements, wheels, with_dependencies=False, python=recipe.python)
        (directory / "dist").mkdir(exist_ok=True)  # empty without distributions (the policy runtime of 3.11)
        for root in recipe.distributions:
            self._build_wheel(root, directory / "dist")
        for destination, source in recipe.files.items():
            target = directory / "lib" / destination
            target.parent.mkdir(parents=True, exist_ok=True)
            _copy_regular_file(source, target)
        for destination, source in recipe.context_files.items():
            target = directory / destination
            target.parent.mkdir(parents=True, exist_ok=True)
            _copy_regular_file(source, target)
            shutil.copymode(source, target)
        for binary in recipe.npm:
            self._extract_npm_binary(binary, directory / binary.destination)
        base = self._base_input(recipe)  # the base image's id, or the parent's tag
        build_args = {"BASE": base, **recipe.build_args}
        return BuildContext(name=recipe.name, tag=recipe.tag(base), directory=directory, build_args=build_args)

    def _fetch_debs(self, recipe: ImageRecipe, dest: Path) -> None:
        """Copy the .deb files of recipe's Debian packages into dest (made even when there are none)."""
        dest.mkdir(parents=True, exist_ok=True)
        packages = self.debian_packages(recipe)
        if packages:
            apt = self._apt_of(recipe.python)
            fetched = download(packages, self._cache / "debs", dest, apt.options if isinstance(apt, HostApt) else ())
            if fetched:
                self._progress(f"downloaded Debian packages: {' '.join(fetched)}")

    def _build_wheel(self, root: Path, dest: Path) -> None:
        """Build the wheel of the source distribution at root into dest with the host's pip (no index, no deps; the
        host's Python need not be the image's, so a Requires-Python of 3.12 or newer is no reason to refuse)."""
        if not (root / "pyproject.toml").is_file():
            raise InfrastructureError(InfraErrorCode.IMAGE_BUILD_FAILED, f"{root} holds no pyproject.toml: the distribution the image "
                                      "installs from it is missing from this checkout")
        with tempfile.TemporaryDirectory(prefix="epg-wheel-") as scratch:
            source = Path(scratch) / root.name  # a copy, so the build leaves nothing in the repository
            shutil.copytree(root, source, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "build", "dist", "*.egg-info"))
            built = subprocess.run(
                [sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check", "--no-deps",
                 "--no-build-isolation", "--ignore-requires-python", "--wheel-dir", str(dest), str(source)],
                capture_output=True, text=True,
            )
        if built.returncode != 0:
            raise InfrastructureError(InfraErrorCode.IMAGE_BUILD_FAILED, f"pip could not build the wheel of {root}", built.stderr[-4000:])

    def _build_pure_wheel(self, pin: str, dest: Path) -> None:
        """Copy into dest the wheel the host's pip builds from pin's sdist (kept in the wheelhouse). Raises
        InfrastructureError(IMAGE_BUILD_FAILED) when pip cannot build it or builds a compiled one: that wheel would
        be for the host's CPython, and the images have no build toolchain to compile one for theirs."""
        house = self._cache / "wheelhouse"
        house.mkdir(parents=True, exist_ok=True)
        name, _, version = pin.partition("==")
        stem = f"{re.sub(r'[-_.]+', '_', name)}-{version}-"
        found = [path for path in house.glob("*.whl") if path.name.lower().startswith(stem.lower()) and path.name.endswith("-none-any.whl")]
        if not found:
            self._progress(f"building the wheel of {pin} from its sdist")
            with tempfile.TemporaryDirectory(prefix="epg-sdist-") as scratch:
                built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check", "--no-deps",
                                        "--no-binary", ":all:", "--wheel-dir", scratch, pin], capture_output=True, text=True)
                wheels = list(Path(scratch).glob("*.whl"))
                if built.returncode != 0 or len(wheels) != 1:
                    raise InfrastructureError(InfraErrorCode.IMAGE_BUILD_FAILED, f"pip could not build a wheel of {pin} from its sdist",
                                              built.stderr[-4000:])
                if not wheels[0].name.endswith("-none-any.whl"):
                    raise InfrastructureError(
                        InfraErrorCode.IMAGE_BUILD_FAILED,
                        f"{pin} has no wheel on the index and compiles ({wheels[0].name}): the images have no build toolchain yet")
                shutil.copyfile(wheels[0], house / wheels[0].name)
                found = [house / wheels[0].name]
        shutil.copyfile(found[0], dest / found[0].name)

    def _extract_npm_binary(self, binary: NpmBinary, target: Path) -> None:
        """Copy one executable out of a pinned npm package (or the whole tarball), fetching it with `npm pack` once."""
        cache = self._cache / "npm"
        cache.mkdir(parents=True, exist_ok=True)
        name, _, version = binary.package.rpartition("@")
        tarball = cache / f"{name.lstrip('@').replace('/', '-')}-{version}.tgz"
        if not tarball.exists():
            npm = shutil.which("npm")
            if npm is None:
                raise InfrastructureError(InfraErrorCode.IMAGE_BUILD_FAILED, f"npm is needed to fetch {binary.package}")
            self._progress(f"fetching {binary.package} from the npm registry")
            fetched = subprocess.run([npm, "pack", binary.package, "--pack-destination", str(cache)], capture_output=True, text=True)
            if fetched.returncode != 0 or not tarball.exists():
                raise InfrastructureError(InfraErrorCode.IMAGE_BUILD_FAILED, f"npm pack {binary.package} failed", fetched.stderr[-4000:])
        target.parent.mkdir(parents=True, exist_ok=True)
        if not binary.member:  # the whole package, unpacked by the Dockerfile's ADD
            shutil.copyfile(tarball, target)
            return
        with tarfile.open(tarball) as archive:
            member = archive.extractfile(binary.member)
            if member is None:
                raise InfrastructureError(InfraErrorCode.IMAGE_BUILD_FAILED, f"{binary.package} has no {binary.member}")
            with open(target, "wb") as out:
                shutil.copyfileobj(member, out, 1 << 20)
        os.chmod(target, 0o755)

    def _fetch_wheels(self, requirements: tuple[str, ...], dest: Path, *, with_dependencies: bool = True,
                      python: str = TARGET_PYTHON) -> None:
        """Copy the wheels of requirements (and of their dependencies, unless told not to) for CPython python into
        dest, downloading into the cache only what is missing."""
        house = self._cache / "wheelhouse"
        house.mkdir(parents=True, exist_ok=True)
        target = ["--only-binary=:all:", "--python-version", python, "--implementation", "cp"]
        if not with_dependencies:
            target.append("--no-deps")
        for tag in platform_tags(python=python):
            target += ["--platform", tag]
        base = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--dest", str(dest), *target]
        offline = subprocess.run([*base, "--no-index", "--find-links", str(house), *requirements], capture_output=True, text=True)
        if offline.returncode == 0:
            return
        self._progress(f"downloading wheels: {' '.join(requirements)}")
        online = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--dest", str(house), *target, *requirements],
            capture_output=True,
            text=True,
        )
        if online.returncode != 0:
            raise InfrastructureError(InfraErrorCode.IMAGE_BUILD_FAILED, "pip could not download the image's wheels", online.stderr[-4000:])
        again = subprocess.run([*base, "--no-index", "--find-links", str(house), *requirements], capture_output=True, text=True)
        if again.returncode != 0:
            raise InfrastructureError(InfraErrorCode.IMAGE_BUILD_FAILED, "the wheelhouse lacks a wheel after downloading", again.stderr[-4000:])

    def _docker_build(self, context: Path, tag: str, build_args: dict[str, str], labels: dict[str, str]) -> None:
        log: list[str] = []
        try:
            for chunk in self._client.api.build(
                path=str(context), tag=tag, buildargs=build_args, labels=labels, rm=True, forcerm=True, decode=True
            ):
                if "stream" in chunk:
                    line = chunk["stream"].rstrip()
                    if line:
                        log.append(line)
                        if line.startswith("Step "):
                            self._progress(f"  {line[:120]}")
                if "error" in chunk:
                    raise _build_failed(tag, str(chunk["error"]), log)
        except APIError as exc:
            raise _build_failed(tag, str(exc), log) from exc


def _build_failed(tag: str, reason: str, log: list[str]) -> InfrastructureError:
    """The error of a failed `docker build` of tag: the engine's reason, and the last lines of the build's log as evidence."""
    return InfrastructureError(InfraErrorCode.IMAGE_BUILD_FAILED, f"docker build of {tag} failed: {reason[:300]}", "\n".join(log[-60:]))


class _ResolvedDebs:
    """Resolutions of Debian package lists, by base and list, valid while the host's apt lists stay as they were."""

    def __init__(self, path: Path, apt_state: str) -> None:
        self._path = path
        self._state = apt_state

    def _key(self, base: str, names: tuple[str, ...]) -> str:
        return hashlib.sha256("\0".join((base, self._state, *names)).encode()).hexdigest()

    def _load(self) -> dict[str, Any]:
        try:
            loaded = json.loads(self._path.read_text())
        except (OSError, ValueError):
            return {}
        return loaded if isinstance(loaded, dict) else {}

    def get(self, base: str, names: tuple[str, ...]) -> tuple[DebianPackage, ...] | None:
        if not self._state:
            return None  # no known state of the apt lists: resolve every time
        entries = self._load().get(self._key(base, names))
        if not isinstance(entries, list):
            return None  # never resolved, or not what put() writes
        try:
            return tuple(DebianPackage(name=e["name"], version=e["version"], architecture=e["architecture"]) for e in entries)
        except (TypeError, KeyError):
            return None

    def put(self, base: str, names: tuple[str, ...], packages: tuple[DebianPackage, ...]) -> None:
        if not self._state:
            return
        stored = self._load()
        stored[self._key(base, names)] = [{"name": p.name, "version": p.version, "architecture": p.architecture} for p in packages]
        self._path.parent.mkdir(parents=True, exist_ok=True)
        scratch = self._path.with_suffix(f".{os.getpid()}.tmp")
        scratch.write_text(json.dumps(stored, indent=1, sort_keys=True))
        os.replace(scratch, self._path)


def _copy_regular_file(source: Path, target: Path) -> None:
    """Copy source, a regular file, to target. Raises CatalogueError when source is a symbolic link or not a
    regular file: the recipe names real paths (environment_recipe refuses links out of a package), so a link
    here appeared after that check, and following it would copy whatever it points to into the image."""
    try:
        descriptor = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if os.path.islink(source):
            raise CatalogueError(f"{source} became a symbolic link after its image's recipe was made; not copied") from exc
        raise
    with os.fdopen(descriptor, "rb") as reader:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise CatalogueError(f"{source} is not a regular file; not copied into the image")
        with open(target, "wb") as writer:
            shutil.copyfileobj(reader, writer, 1 << 20)
