"""The exact versions of the SDK layer (NumPy, protobuf, grpcio, gymnasium and what they need): `sdk-layer.lock`,
the one place they are written, read by the image recipes and `env new`, and used by `make setup` as pip's constraints.

Standard library only: the lock is read before anything else of the orchestrator may be installed.
"""

from __future__ import annotations

import re
import tomllib
from functools import cache
from pathlib import Path

SDK_LAYER_LOCK = Path(__file__).resolve().parent / "sdk-layer.lock"
# The MCP server of the agent image (the `mcp` SDK and what it needs beyond agent-base's pins of the SDK layer).
AGENT_MCP_LOCK = Path(__file__).resolve().parent / "agent-mcp.lock"
# What the environment runner imports: an environment package's lock must pin these at the layer's versions.
RUNNER_NAMES = ("grpcio", "numpy", "protobuf", "typing-extensions")
# What the policy runtime imports (its image holds no grpcio and no gymnasium).
POLICY_NAMES = ("numpy", "protobuf")
# What the agent base image needs for the Host API client.
AGENT_NAMES = RUNNER_NAMES

# A lock line: a name, optional extras, `==` and one version, nothing else. The pins become arguments of the host's
# `pip download` and lines of an image's requirements.txt, so anything more (an option such as `-f URL`,
# `--index-url`, `-e`, `-r FILE`, a URL or a path) would change where pip looks or what it reads.
_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
_PIN = re.compile(rf"{_NAME}(?:\[\s*{_NAME}(?:\s*,\s*{_NAME})*\s*\])?\s*==\s*[A-Za-z0-9](?:[A-Za-z0-9.+!_-]*[A-Za-z0-9])?")
_COMMENT = re.compile(r"(?:^|\s+)#.*$")  # pip's rule: `#` at the start or after whitespace


class LockError(ValueError):
    """A lock line is not a plain pin; the message names the file, the line number and the line."""


def normalise(name: str) -> str:
    """A distribution name as pip compares it (PEP 503): lower case, runs of `-_.` as one `-`, extras dropped."""
    return re.sub(r"[-_.]+", "-", name.split("[")[0].strip().lower())


def parse_lock(text: str, source: str) -> tuple[str, ...]:
    """The pins of a lock file's text: one `NAME==VERSION` (or `NAME[EXTRA,...]==VERSION`) per line, comments and
    blank lines skipped, each as written without spaces. Raises LockError naming source and the first other line."""
    pins = []
    for number, line in enumerate(text.splitlines(), 1):
        pin = _COMMENT.sub("", line).strip()
        if not pin:
            continue
        if not _PIN.fullmatch(pin):
            raise LockError(f"{source}:{number}: {line.strip()!r} is not a plain pinned requirement: write one NAME==VERSION "
                            "(or NAME[EXTRA]==VERSION) per line, without pip options, URLs, paths, markers or hashes")
        pins.append(re.sub(r"\s+", "", pin))
    return tuple(pins)


@cache
def sdk_layer_versions() -> dict[str, str]:
    """Normalised name -> exact version of every pin of sdk-layer.lock. Raises LockError for a malformed lock."""
    versions = {}
    for pin in parse_lock(SDK_LAYER_LOCK.read_text(), str(SDK_LAYER_LOCK)):
        name, _, version = pin.partition("==")
        versions[normalise(name)] = version
    return versions


def sdk_layer_pins() -> tuple[str, ...]:
    """Every pin of sdk-layer.lock as `name==version`, sorted by name: what the env-sdk image installs."""
    return tuple(f"{name}=={version}" for name, version in sorted(sdk_layer_versions().items()))


@cache
def agent_mcp_pins() -> tuple[str, ...]:
    """Every pin of agent-mcp.lock as `name==version`, sorted by normalised name: what agent-base installs for its MCP
    server beside pins_of(*AGENT_NAMES). Raises LockError for a malformed lock."""
    pins = parse_lock(AGENT_MCP_LOCK.read_text(), str(AGENT_MCP_LOCK))
    return tuple(sorted(pins, key=lambda pin: normalise(pin.partition("==")[0])))


def pins_of(*names: str) -> tuple[str, ...]:
    """The `name==version` pins of names from sdk-layer.lock, sorted. Raises KeyError naming a name it does not pin."""
    versions = sdk_layer_versions()
    missing = sorted({normalise(name) for name in names} - set(versions))
    if missing:
        raise KeyError(f"{SDK_LAYER_LOCK.name} pins no {', '.join(missing)}")
    return tuple(f"{name}=={versions[name]}" for name in sorted({normalise(name) for name in names}))


def sdk_version(sdk_root: Path) -> str:
    """The version in sdk_root/pyproject.toml: the epg-sdk the images install and the orchestrator depends on."""
    return str(tomllib.loads((sdk_root / "pyproject.toml").read_text())["project"]["version"])
