"""`env new`: a new environment package generated around a gymnasium id, from the template files in templates/.

The README and the tests hold the real spaces of `gymnasium.make(ID)` on this
host; requirements.lock pins the host's installed gymnasium and everything it
needs, as the bundled packages pin theirs, but what the environment runner
imports (NumPy, typing-extensions) at the SDK layer's versions
(orchestrator/images/sdk-layer.lock), whatever this host has installed.
"""

from __future__ import annotations

import inspect
import json
import re
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from string import Template
from typing import Any

from orchestrator.images.pins import RUNNER_NAMES, sdk_layer_versions

TEMPLATES = Path(__file__).resolve().parent / "templates" / "gymnasium"
# Template file -> path in the new package; {module} is the import package's name. Python templates
# end in .tmpl: they are no Python before substitution.
_FILES = {
    "pyproject.toml": "pyproject.toml",
    "README.md": "README.md",
    "module.py.tmpl": "{module}/__init__.py",
    "baseline/policy.py.tmpl": "baseline/policy.py",
    "tests/conftest.py.tmpl": "tests/conftest.py",
    "tests/test_benchmark.py.tmpl": "tests/test_benchmark.py",
}
_NAME = re.compile(r"^[a-z][a-z0-9_-]*$")
_BENCHMARK_ID = re.compile(r"^[A-Za-z][A-Za-z0-9_.:/-]*$")


class ScaffoldError(Exception):
    """The package cannot be generated: a bad name, an existing directory, an unknown gymnasium id or an unsupported space."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NewPackage:
    root: Path
    benchmark_id: str
    image: str
    module: str


def new_gymnasium_package(directory: Path, gym_id: str, *, benchmark_id: str, name: str, failure_return: float = 0.0) -> NewPackage:
    """Write a package at directory wrapping gymnasium's gym_id as the Benchmark benchmark_id; return what was made.

    name gives the distribution `epg-env-NAME`, the module `epg_env_NAME` and the
    image `env-NAME`. Raises ScaffoldError; nothing is written then.
    """
    name = name.lower().replace("_", "-")
    if not _NAME.match(name):
        raise ScaffoldError(f"name {name!r}: lower-case letters, digits and dashes, starting with a letter")
    if not _BENCHMARK_ID.match(benchmark_id):
        raise ScaffoldError(f"benchmark id {benchmark_id!r}: letters, digits and -_.:/, starting with a letter")
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise ScaffoldError(f"{directory} exists and is not an empty directory")
    described = _describe(gym_id)
    if described["action_space"]["type"] not in ("discrete", "box"):
        raise ScaffoldError(f"{gym_id}: the random baseline covers discrete and box action spaces, not {described['action_space']['type']}")
    module = "epg_env_" + name.replace("-", "_")
    fields = _fields(described, gym_id=gym_id, benchmark_id=benchmark_id, name=name, module=module, failure_return=failure_return)
    root = directory.resolve()
    for template, target in _FILES.items():
        path = root / target.format(module=module)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(Template((TEMPLATES / template).read_text(encoding="utf-8")).substitute(fields), encoding="utf-8")
    (root / "requirements.lock").write_text("\n".join(_lock("gymnasium")) + "\n", encoding="utf-8")
    return NewPackage(root=root, benchmark_id=benchmark_id, image=f"env-{name}", module=module)


def _describe(gym_id: str) -> dict[str, Any]:
    try:
        from epg_sdk.gym_adapter import describe_environment
    except ImportError as exc:
        raise ScaffoldError(f"env new reads the spaces from gymnasium on this host: install it ({exc})") from exc
    try:
        return describe_environment(gym_id)
    except Exception as exc:  # gymnasium raises several error types for an unknown or broken id
        raise ScaffoldError(f"gymnasium.make({gym_id!r}) failed: {type(exc).__name__}: {exc}") from exc


def _fields(described: dict[str, Any], *, gym_id: str, benchmark_id: str, name: str, module: str, failure_return: float) -> dict[str, str]:
    horizon = described["max_episode_steps"] or 1000
    versions = {dist: metadata.version(dist) for dist in ("gymnasium", "epg-sdk")} | {"numpy": sdk_layer_versions()["numpy"]}
    dependencies = [f"epg-sdk[gym]=={versions['epg-sdk']}", f"gymnasium=={versions['gymnasium']}", f"numpy=={versions['numpy']}"]
    return {
        "distribution": f"epg-env-{name}",
        "module": module,
        "image": f"env-{name}",
        "alias": name,
        "benchmark_id": benchmark_id,
        "gym_id": gym_id,
        "gymnasium_version": versions["gymnasium"],
        "entry_point": described["entry_point"],
        "dependencies": "\n".join(f'    "{d}",' for d in dependencies),
        "horizon": str(horizon),
        "failure_return": repr(float(failure_return)),
        "description": f"gymnasium's {gym_id} as the Benchmark {benchmark_id}: mean return over {horizon}-step Episodes, higher is better.",
        "observation_repr": described["observation_repr"],
        "action_repr": described["action_repr"],
        "observation_table": _space_table(described["observation_space"]),
        "action_table": _space_table(described["action_space"]),
        "observation_json": json.dumps(_plain(described["observation_space"])),
        "action_json": json.dumps(_plain(described["action_space"])),
        "upstream_doc": re.sub(r"(?m)^#", "##", inspect.cleandoc(described["doc"])) or "(none)",
    }


def _plain(value: Any) -> Any:
    """The space description with NumPy arrays as lists (JSON)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "tolist"):
        return value.tolist()
    return value


def _space_table(space: dict[str, Any]) -> str:
    """A Markdown description of one space: per-component bounds for a box, the values for a discrete space."""
    if space["type"] == "discrete":
        start, n = int(space["start"]), int(space["n"])
        return f"One integer in `[{start}, {start + n - 1}]` ({n} values); a NumPy integer or a one-element array of one is accepted."
    if space["type"] != "box":
        return f"A `{space['type']}` space: `{json.dumps(_plain(space))}`."
    low, high = _plain(space["low"]), _plain(space["high"])
    flat_low, flat_high = _flatten(low), _flatten(high)
    lines = [f"A NumPy array of shape `{tuple(space['shape'])}`, dtype `{space['dtype']}`:", "", "| index | low | high |", "| --- | --- | --- |"]
    if len(flat_low) > 32:
        return "\n".join(lines[:1] + ["", f"bounds from {min(flat_low)} to {max(flat_high)} ({len(flat_low)} components)."])
    lines += [f"| {i} | {lo} | {hi} |" for i, (lo, hi) in enumerate(zip(flat_low, flat_high, strict=True))]
    return "\n".join(lines)


def _flatten(value: Any) -> list[Any]:
    return [x for item in value for x in _flatten(item)] if isinstance(value, list) else [value]


def _lock(root: str) -> list[str]:
    """root and every distribution it requires (no extras), pinned at the versions installed here, sorted; what the
    environment runner imports (RUNNER_NAMES) at the SDK layer's versions, which an environment image must keep."""
    pins: dict[str, str] = {}
    layer = sdk_layer_versions()
    pending = [root]
    while pending:
        name = re.sub(r"[-_.]+", "-", pending.pop().lower())
        if name in pins:
            continue
        try:
            pins[name] = layer[name] if name in RUNNER_NAMES else metadata.version(name)
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError as exc:
            raise ScaffoldError(f"requirements.lock: {name} is not installed here; install {root} with its dependencies") from exc
        for requirement in requires:
            requirement_name, _, marker = requirement.partition(";")
            if "extra" in marker:
                continue
            pending.append(re.split(r"[\s<>=!~\[(]", requirement_name.strip(), maxsplit=1)[0])
    return [f"{name}=={version}" for name, version in sorted(pins.items())]
