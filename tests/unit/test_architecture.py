"""Layering: which parts of orchestrator/ and of the SDK (sdk/) may import what, read from the source with ast.

The rules are the table in ARCHITECTURE.md, parsed here, plus a few narrower ones written out below.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from orchestrator.images.recipes import POLICY_FILES, SDK_DISTRIBUTION, distribution_sources

REPO_ROOT = Path(__file__).resolve().parents[2]
SDK_ROOT = REPO_ROOT / "sdk"
WALKED = (REPO_ROOT / "orchestrator", SDK_ROOT / "epg_sdk", SDK_ROOT / "epg")
FIRST_PARTY = ("orchestrator", "epg", "epg_sdk")
STDLIB = frozenset(sys.stdlib_module_names)


def _import_root(path: Path) -> Path:
    """The directory a first-party file is imported from: sdk/ for the SDK distribution, else the repository."""
    return SDK_ROOT if path.is_relative_to(SDK_ROOT) else REPO_ROOT


def module_name(path: Path) -> str:
    parts = list(path.relative_to(_import_root(path)).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def module_file(name: str) -> Path | None:
    """The repository file of a first-party module, or None."""
    root = SDK_ROOT if name.split(".")[0] in ("epg", "epg_sdk") else REPO_ROOT
    base = root.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def is_first_party(name: str) -> bool:
    return name.split(".")[0] in FIRST_PARTY


def imported_modules(path: Path) -> set[str]:
    """Dotted names of every module path imports, anywhere in the file (functions included).

    `from a import b` yields a, and a.b when a.b is a module (for third-party
    packages a.b is kept as well, so that `from google import protobuf` counts
    as google.protobuf). Relative imports are resolved against path's package.
    """
    return _imports_of(path.read_text(), module_name(path), path.name == "__init__.py")


def _imports_of(source: str, current: str, is_package: bool) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                package = current.split(".") if is_package else current.split(".")[:-1]
                package = package[: len(package) - (node.level - 1)]
                base = ".".join(package + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            names.add(base)
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                if not is_first_party(base) or module_file(submodule) is not None:
                    names.add(submodule)
    return names


def under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


@cache
def all_modules() -> dict[str, set[str]]:
    return {
        path.relative_to(REPO_ROOT).as_posix(): imported_modules(path) for package in WALKED for path in sorted(package.rglob("*.py"))
    }


@dataclass(frozen=True)
class Rule:
    description: str
    applies: callable
    allowed: tuple[str, ...] | None = None  # besides the standard library; exact "orchestrator" is the root only
    forbidden: tuple[str, ...] = ()

    def violations(self, modules: set[str]) -> list[str]:
        found = []
        for name in sorted(modules):
            if any(under(name, prefix) for prefix in self.forbidden):
                found.append(name)
            elif self.allowed is not None and name.split(".")[0] not in STDLIB:
                if not any(name == "orchestrator" if item == "orchestrator" else under(name, item) for item in self.allowed):
                    found.append(name)
        return found


def in_dir(directory: str, *, except_files: tuple[str, ...] = ()):
    return lambda path: path.startswith(directory) and path not in except_files


def one_of(*files: str):
    return lambda path: path in files


def outside(*directories: str):
    return lambda path: not path.startswith(directories)


# The table in ARCHITECTURE.md: package -> what it may import.

@dataclass(frozen=True)
class TableRow:
    packages: tuple[str, ...]
    allowed: tuple[str, ...] | None  # None: anything but `forbidden`
    forbidden: tuple[str, ...] = ()
    stdlib: bool = False

    def permits(self, name: str) -> bool:
        if any(under(name, item) for item in self.forbidden):
            return False
        if self.allowed is None or any(under(name, own) for own in self.packages):
            return True
        if self.stdlib and name.split(".")[0] in STDLIB:
            return True
        return any(name == "orchestrator" if item == "orchestrator" else under(name, item) for item in self.allowed)


_NAME = re.compile(r"`([A-Za-z_][\w.]*)`")


def parse_may_import(cell: str) -> tuple[tuple[str, ...] | None, tuple[str, ...], bool]:
    """(allowed names or None for everything, forbidden names, stdlib allowed) of one "may import" cell. Raises ValueError."""
    cell = cell.strip()
    if cell == "everything":
        return None, (), True
    if cell.startswith("everything but "):
        forbidden = tuple(_names(cell.removeprefix("everything but ")))
        return None, forbidden, True
    allowed, stdlib = [], False
    for token in (t.strip() for t in cell.split(",")):
        if token == "stdlib":
            stdlib = True
        else:
            allowed += _names(token)
    return tuple(allowed), (), stdlib


def _names(text: str) -> list[str]:
    names = []
    for token in (t.strip() for t in text.split(",")):
        match = _NAME.fullmatch(token)
        if match is None:
            raise ValueError(f"not a backticked package name: {token!r}")
        names.append(match.group(1))
    return names


def architecture_table(text: str) -> list[TableRow]:
    """The rows of the table under "## Layers and who may import whom". Raises ValueError on a malformed row."""
    section = text.split("## Layers and who may import whom", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 3:
            raise ValueError(f"expected 3 cells: {line}")
        allowed, forbidden, stdlib = parse_may_import(cells[2])
        rows.append(TableRow(packages=tuple(_names(cells[0])), allowed=allowed, forbidden=forbidden, stdlib=stdlib))
    return rows


TABLE = architecture_table((REPO_ROOT / "ARCHITECTURE.md").read_text())


def row_of(module: str) -> TableRow | None:
    """The row of the most specific package that module falls under."""
    matches = [(len(package), row) for row in TABLE for package in row.packages if under(module, package)]
    return max(matches, key=lambda match: match[0])[1] if matches else None


def test_the_architecture_table_is_parsed_whole():
    text = (REPO_ROOT / "ARCHITECTURE.md").read_text()
    listed = re.findall(r"^\| `", text.split("## Layers and who may import whom", 1)[1].split("\n## ", 1)[0], flags=re.M)
    assert len(TABLE) == len(listed) >= 20
    cli = row_of("orchestrator.cli.app")
    assert cli is not None and cli.allowed is None and cli.forbidden == ()


def test_every_module_falls_under_a_row_and_every_row_matches_a_module():
    modules = {module_name(REPO_ROOT / path) for path in all_modules()}
    assert {m for m in modules if row_of(m) is None} == set()
    unmatched = [package for row in TABLE for package in row.packages if not any(under(m, package) for m in modules)]
    assert unmatched == []


@pytest.mark.parametrize("path", sorted(all_modules()))
def test_each_module_imports_only_what_its_row_of_the_table_allows(path):
    row = row_of(module_name(REPO_ROOT / path))
    assert sorted(name for name in all_modules()[path] if not row.permits(name)) == []


def test_a_table_row_refuses_what_it_does_not_list():
    (row,) = architecture_table("## Layers and who may import whom\n| `a.b` | x | stdlib, `numpy`, `orchestrator` |\n")
    assert row.permits("json") and row.permits("numpy.random") and row.permits("a.b.c") and row.permits("orchestrator")
    assert not row.permits("docker") and not row.permits("orchestrator.cli") and not row.permits("a")
    (rest,) = architecture_table("## Layers and who may import whom\n| `r` | x | everything but `orchestrator.cli`, `typer` |\n")
    assert rest.permits("docker") and not rest.permits("orchestrator.cli.app") and not rest.permits("typer")
    with pytest.raises(ValueError):
        architecture_table("## Layers and who may import whom\n| `a` | x | stdlib, numpy |\n")


# Narrower rules than the table's rows.
RULES = [
    Rule(
        "the SDK package's own module loads nothing on import",
        one_of("sdk/epg_sdk/__init__.py"),
        allowed=(),
    ),
    Rule(
        "the SDK never imports the orchestrator",
        in_dir("sdk/epg_sdk/"),
        forbidden=("orchestrator",),
    ),
    Rule(
        "the protocol layers know no engine, RPC framework or CLI",
        lambda path: path.startswith(("orchestrator/protocol/", "sdk/epg_sdk/protocol/")),
        forbidden=("docker", "grpc", "typer", "rich", "pydantic"),
    ),
    Rule(
        "the runner and episode loop know no engine, CLI or pydantic",
        one_of("sdk/epg_sdk/runtime/runner.py", "sdk/epg_sdk/runtime/episode_loop.py"),
        forbidden=("docker", "typer", "rich", "pydantic", "orchestrator"),
    ),
    Rule(
        "the SDK knows no engine, CLI or pydantic, and only the runner uses grpc",
        in_dir("sdk/epg_sdk/", except_files=("sdk/epg_sdk/runtime/runner.py",)),
        forbidden=("docker", "grpc", "typer", "rich", "pydantic"),
    ),
    Rule(
        "only the gymnasium adapter imports gymnasium",
        lambda path: path != "sdk/epg_sdk/gym_adapter.py",
        forbidden=("gymnasium",),
    ),
    Rule(
        "the Host API servicer knows no engine, CLI or Run internals",
        in_dir("orchestrator/hostapi/"),
        forbidden=("docker", "typer", "rich", "pydantic", "orchestrator.backends", "orchestrator.run", "orchestrator.cli"),
    ),
    Rule(
        "nothing below the CLI imports the CLI",
        outside("orchestrator/cli/", "sdk/"),
        forbidden=("orchestrator.cli",),
    ),
    Rule(
        "only backends and images talk to Docker",
        outside("orchestrator/backends/", "orchestrator/images/"),
        forbidden=("docker",),
    ),
    Rule(
        "only the Kubernetes backend talks to Kubernetes",
        outside("orchestrator/backends/kubernetes/"),
        forbidden=("kubernetes",),
    ),
    Rule(
        "the Kubernetes backend does not talk to Docker",
        in_dir("orchestrator/backends/kubernetes/"),
        forbidden=("docker", "orchestrator.backends.engine", "orchestrator.backends.container_spec"),
    ),
    Rule(
        "only the CLI uses typer and rich",
        outside("orchestrator/cli/"),
        forbidden=("typer", "rich"),
    ),
    Rule(
        "only the pytest plugin uses testcontainers",
        outside("orchestrator/pytest_plugin.py"),
        forbidden=("testcontainers",),
    ),
    Rule(
        "the pytest plugin talks to Docker through backends, images and testcontainers, and knows no CLI",
        one_of("orchestrator/pytest_plugin.py"),
        forbidden=("docker", "typer", "rich", "orchestrator.cli", "orchestrator.run"),
    ),
]


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.description)
def test_import_rules_hold(rule):
    checked = {path: modules for path, modules in all_modules().items() if rule.applies(path)}
    assert checked, f"no module falls under: {rule.description}"
    broken = {path: rule.violations(modules) for path, modules in checked.items()}
    assert {path: names for path, names in broken.items() if names} == {}


def test_the_walk_covers_every_layer():
    paths = set(all_modules())
    for expected in (
        "orchestrator/kernel/program.py",
        "orchestrator/protocol/runner_messages.py",
        "sdk/epg_sdk/protocol/values.py",
        "sdk/epg_sdk/runtime/policy_runtime.py",
        "sdk/epg_sdk/planning.py",
        "orchestrator/backends/engine.py",
        "orchestrator/cli/app.py",
    ):
        assert expected in paths


def test_import_collection_sees_imports_inside_functions_and_from_imports():
    source = (
        "import os.path\n"
        "def late():\n"
        "    import docker\n"
        "    from google import protobuf\n"
        "    from epg_sdk.protocol import values, framing\n"
        "    from orchestrator import ABI_VERSION\n"
        "class C:\n"
        "    def m(self):\n"
        "        from . import infrastructure\n"
    )
    names = _imports_of(source, "orchestrator.kernel.example", is_package=False)
    assert {"os.path", "docker", "google", "google.protobuf", "epg_sdk.protocol.values", "epg_sdk.protocol.framing",
            "orchestrator", "orchestrator.kernel", "orchestrator.kernel.infrastructure"} <= names
    assert "orchestrator.ABI_VERSION" not in names


def test_the_kernel_row_refuses_a_forbidden_import_found_in_a_function():
    kernel = row_of("orchestrator.kernel.example")
    names = _imports_of("def f():\n    import numpy\n", "orchestrator.kernel.example", is_package=False)
    assert [name for name in names if not kernel.permits(name)] == ["numpy"]
    assert not kernel.permits("epg_sdk.protocol.values") and not kernel.permits("orchestrator.protocol.runner_messages")
    assert all(kernel.permits(name) for name in (
        "epg_sdk.codes", "epg_sdk.outcomes", "orchestrator", "orchestrator.kernel.infrastructure", "hashlib", "os.path"))


def test_kernel_imports_pull_in_no_heavy_or_framework_modules():
    code = (
        "import json, sys\n"
        "import orchestrator.kernel.program, orchestrator.kernel.outcomes, orchestrator.kernel.infrastructure\n"
        "import orchestrator.kernel.evaluation, orchestrator.kernel.ports, orchestrator.kernel.seeds\n"
        "import orchestrator.kernel.session, orchestrator.kernel.selection\n"
        "import epg_sdk.outcomes, epg_sdk.planning  # the pure SDK modules the kernel may use\n"
        "assert 'epg_sdk.codes' in sys.modules\n"
        "heavy = ['docker', 'grpc', 'google.protobuf', 'typer', 'rich', 'numpy', 'gymnasium', 'pydantic', 'kubernetes']\n"
        "print(json.dumps(sorted(m for m in heavy if m in sys.modules)))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []


KUBERNETES_BACKEND = sorted(path for path in all_modules() if path.startswith("orchestrator/backends/kubernetes/"))


@pytest.mark.parametrize("path", KUBERNETES_BACKEND)
def test_the_kubernetes_backend_loads_no_docker_client_through_what_it_imports(path):
    # The direct rule above sees only a module's own imports; this follows every first-party import to its end.
    reached = first_party_closure(module_name(REPO_ROOT / path))
    assert {file: sorted(name for name in imported_modules(REPO_ROOT / file) if under(name, "docker"))
            for file in sorted(reached) if any(under(name, "docker") for name in imported_modules(REPO_ROOT / file))} == {}


def test_the_closure_walk_finds_docker_behind_a_first_party_import():
    # A module of the Docker backend reaches docker-py through engine.py: the walk above must see such a path.
    reached = first_party_closure("orchestrator.backends.sandbox")
    assert "orchestrator/backends/engine.py" in reached
    assert any(under(name, "docker") for name in imported_modules(REPO_ROOT / "orchestrator/backends/engine.py"))


def test_importing_the_kubernetes_sandbox_does_not_load_docker():
    code = (
        "import json, sys\n"
        "import orchestrator.backends.kubernetes.sandbox\n"
        "print(json.dumps(sorted(m for m in sys.modules if m == 'docker' or m.startswith('docker.'))))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []


# Calls that create a container: docker-py's high-level create and run, its low-level create_container, and a
# testcontainers container (created when it starts).
CONTAINER_CREATION = ("containers.create", "containers.run", "create_container", "DockerContainer")
# Who may create containers besides backends/engine.py (DockerEngine._create), and why.
CREATES_CONTAINERS = {
    "orchestrator/backends/engine.py": "the one place: DockerEngine.start and copy_from_image go through DockerEngine._create",
    "orchestrator/pytest_plugin.py": "an author's tests run an image's checks in a testcontainers container (the design card's choice)",
}


def _attribute_path(node: ast.AST) -> str:
    """The dotted path of a call's function as written: `self.client.containers.create` -> that string."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def calls_in(source: str, endings: tuple[str, ...]) -> list[str]:
    """The calls in source whose function, as written, ends with one of endings (a dotted suffix or a bare name)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            path = _attribute_path(node.func)
            if any(path == ending or path.endswith("." + ending) for ending in endings):
                found.append(f"{path}:{node.lineno}")
    return found


def test_the_call_finder_sees_each_way_of_creating_a_container():
    source = ("def f(client, engine, api):\n"
              "    client.containers.create('img')\n"
              "    engine.client.containers.run('img', detach=True)\n"
              "    api.create_container('img')\n"
              "    DockerContainer('img').start()\n"
              "    engine.start(spec)\n"
              "    client.containers.list()\n")
    assert [call.split(":")[0] for call in calls_in(source, CONTAINER_CREATION)] == [
        "client.containers.create", "engine.client.containers.run", "api.create_container", "DockerContainer"]


def test_only_the_engine_creates_containers():
    creating = {path: calls for path in all_modules() if path.startswith("orchestrator/")
                and (calls := calls_in((REPO_ROOT / path).read_text(), CONTAINER_CREATION))}
    assert "orchestrator/backends/engine.py" in creating
    assert len(creating["orchestrator/backends/engine.py"]) == 1, creating["orchestrator/backends/engine.py"]
    assert {path: calls for path, calls in creating.items() if path not in CREATES_CONTAINERS} == {}


# Who may construct a sandbox besides sandbox_opening.open_sandbox, and why: nobody today.
OPENS_SANDBOXES: dict[str, str] = {}


def test_only_sandbox_opening_constructs_a_sandbox():
    constructing = {path: calls for path in all_modules() if path.startswith("orchestrator/")
                    and (calls := calls_in((REPO_ROOT / path).read_text(), ("DockerSandbox", "KubernetesSandbox")))}
    assert sorted(calls.split(":")[0] for calls in constructing.pop("orchestrator/sandbox_opening.py")) == ["DockerSandbox",
                                                                                                           "KubernetesSandbox"]
    assert {path: calls for path, calls in constructing.items() if path not in OPENS_SANDBOXES} == {}


# Where a label name may be written out besides backends/labels.py, and why: nowhere today.
WRITES_LABEL_NAMES: dict[str, str] = {}


def label_names_in(source: str) -> list[str]:
    """The strings of source's code (docstrings left out: they may name a label) that write out a label name."""
    tree = ast.parse(source)
    docstrings = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}
    return [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docstrings and "org.evopolicygym." in node.value]


def test_the_label_name_finder_sees_code_not_docstrings():
    source = ('"""Reads the `org.evopolicygym.benchmarks` label."""\n'
              'NAME = "org.evopolicygym.benchmarks"\n'
              'def f(sandbox):\n'
              '    """Filters on org.evopolicygym.sandbox."""\n'
              '    return [f"org.evopolicygym.sandbox={sandbox}"]\n')
    assert label_names_in(source) == ["org.evopolicygym.benchmarks", "org.evopolicygym.sandbox="]


def test_label_names_are_written_out_in_the_labels_module_alone():
    paths = sorted({path for path in all_modules() if path.startswith("orchestrator/")}
                   | {path.relative_to(REPO_ROOT).as_posix() for path in (REPO_ROOT / "bench").glob("*.py")})
    writing = {path: names for path in paths if path != "orchestrator/backends/labels.py"
               and (names := label_names_in((REPO_ROOT / path).read_text()))}
    assert {path: names for path, names in writing.items() if path not in WRITES_LABEL_NAMES} == {}


@pytest.mark.parametrize("path", sorted(set(POLICY_FILES)))
def test_every_image_file_exists_in_the_repository(path):
    assert (REPO_ROOT / path).is_file()


def test_image_file_lists_have_no_duplicates():
    assert len(POLICY_FILES) == len(set(POLICY_FILES))


def first_party_closure(start: str) -> set[str]:
    """Repository files executed when start is imported: its first-party imports and their packages, transitively."""
    seen: set[str] = set()
    pending = [start]
    while pending:
        name = pending.pop()
        parts = name.split(".")
        for depth in range(1, len(parts) + 1):
            prefix = ".".join(parts[:depth])
            path = module_file(prefix)
            if path is None:
                continue
            relative = path.relative_to(REPO_ROOT).as_posix()
            if relative in seen:
                continue
            seen.add(relative)
            pending.extend(m for m in imported_modules(path) if is_first_party(m))
    return seen


def test_the_policy_image_holds_every_module_the_policy_runtime_imports():
    needed = first_party_closure("epg_sdk.runtime.policy_runtime")
    assert "sdk/epg_sdk/protocol/values.py" in needed
    assert "sdk/epg/v1/values_pb2.py" in needed
    assert not any(path.startswith("orchestrator/") for path in needed)
    assert needed - set(POLICY_FILES) == set()


def test_the_environment_image_holds_every_module_the_runner_imports():
    needed = first_party_closure("epg_sdk.runtime.runner")
    assert "sdk/epg_sdk/runtime/episode_loop.py" in needed
    assert not any(path.startswith("orchestrator/") for path in needed)
    # The environment image installs the whole SDK distribution from its sources.
    assert needed - {p.relative_to(REPO_ROOT).as_posix() for p in distribution_sources(SDK_DISTRIBUTION)} == set()


@pytest.mark.parametrize("package", sorted(p.parent.relative_to(REPO_ROOT).as_posix() for p in REPO_ROOT.glob("environments/*/pyproject.toml"))
                         + ["tests/environments/probe"])
def test_environment_packages_import_the_sdk_never_the_orchestrator(package):
    imports = {
        path.relative_to(REPO_ROOT).as_posix(): _imports_of(path.read_text(), path.stem, path.name == "__init__.py")
        for path in sorted((REPO_ROOT / package).rglob("*.py"))
    }
    assert any(any(under(name, "epg_sdk") for name in names) for names in imports.values())
    assert {path: sorted(n for n in names if under(n, "orchestrator")) for path, names in imports.items()
            if any(under(n, "orchestrator") for n in names)} == {}


# What ARCHITECTURE.md names in backticks exists: a module, function, class or method (dotted, from its package or from
# any package above it: `kernel.seeds.keyed_seed`, `relay_setup.with_grants`, `ContainerPool.expect`), a key of the Run
# spec (`relay.max_tokens`, `sandbox.backend: kubernetes`), or a file or directory of the repository (from its root or
# from orchestrator/: `backends/kubernetes/relay.py`, `digests.py`).

# Named in backticks, and none of the above, on purpose: what each is.
NOT_IN_THE_CODE = {
    "epg.benchmarks": "the entry-point group an environment package registers its Benchmarks in",
    "orchestrator/bundled_environments": "made in the wheel by setup.py's build_py step",
    "workspace/": "a directory of a run directory",
    "private/": "a directory of a run directory",
}
FILE_SUFFIXES = (".json", ".jsonl", ".md", ".yaml", ".sock", ".sh", ".toml", ".lock", ".html", ".log")
_DOTTED = re.compile(r"([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?:: .*)?")


def _defined(body: list[ast.stmt], name: str) -> ast.AST | None:
    """The statement of body that defines name (a def, a class, an assignment, a field), or None."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return node
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(target, ast.Name) and target.id == name for target in targets):
            return node
    return None


def _members_exist(body: list[ast.stmt], names: list[str]) -> bool:
    for name in names:
        node = _defined(body, name)
        if node is None:
            return False
        body = getattr(node, "body", [])
    return True


@cache
def _first_party() -> dict[str, list[ast.stmt]]:
    """Every first-party module's dotted name -> its parsed body, our `evopolicygym` (compat/) included."""
    modules = {module_name(REPO_ROOT / path): ast.parse((REPO_ROOT / path).read_text()).body for path in all_modules()}
    compat = REPO_ROOT / "compat"
    for path in sorted((compat / "evopolicygym").rglob("*.py")):
        parts = list(path.relative_to(compat).with_suffix("").parts)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = ast.parse(path.read_text()).body
    return modules


def _code_exists(dotted: str) -> bool:
    """Whether dotted names a module, or something a module defines, with the module named from any package above it."""
    parts = dotted.split(".")
    for name, body in _first_party().items():
        segments = name.split(".")
        for length in range(len(parts), 0, -1):
            if segments[-length:] == parts[:length] and _members_exist(body, parts[length:]):
                return True
    # A class named alone: `ContainerPool.cancel_batch`.
    return any(_members_exist(body, parts) for body in _first_party().values() if _defined(body, parts[0]) is not None
               and isinstance(_defined(body, parts[0]), ast.ClassDef))


def _names_first_party(dotted: str) -> bool:
    """Whether dotted starts with the name of a first-party package or module, or of a class one defines."""
    head = dotted.split(".")[0]
    return any(head in module.split(".") or isinstance(_defined(body, head), ast.ClassDef) for module, body in _first_party().items())


def _spec_key_exists(dotted: str) -> bool:
    from orchestrator.run.spec import json_schema

    schema = json_schema()
    definitions, node = schema["$defs"], schema
    for key in dotted.split("."):
        while "$ref" in node or "anyOf" in node:
            node = definitions[node["$ref"].rsplit("/", 1)[1]] if "$ref" in node else next(
                option for option in node["anyOf"] if "$ref" in option or "properties" in option)
        if key not in node.get("properties", {}):
            return False
        node = node["properties"][key]
    return True


def _path_exists(path: str) -> bool:
    if "/" not in path:  # a file named alone: anywhere below orchestrator/ or sdk/
        return any((REPO_ROOT / top).rglob(path) for top in ("orchestrator", "sdk"))
    return (REPO_ROOT / path).exists() or (REPO_ROOT / "orchestrator" / path).exists()


def architecture_names() -> tuple[set[str], set[str]]:
    """The dotted names and the repository paths that ARCHITECTURE.md puts in backticks."""
    dotted, paths = set(), set()
    for token in re.findall(r"`([^`\n]+)`", (REPO_ROOT / "ARCHITECTURE.md").read_text()):
        if token in NOT_IN_THE_CODE or token.startswith("/"):  # an absolute path is one inside a container
            continue
        if re.fullmatch(r"[\w./-]+", token) and ("/" in token or token.endswith(".py")):
            first = token.split("/")[0]
            if token.endswith(".py") or (REPO_ROOT / first).is_dir() or (REPO_ROOT / "orchestrator" / first).is_dir():
                paths.add(token)  # not a Kubernetes name such as `pods/exec`
        elif (match := _DOTTED.fullmatch(token)) and not token.endswith(FILE_SUFFIXES):
            dotted.add(match.group(1))
    return dotted, paths


def test_every_module_function_spec_key_and_path_architecture_md_names_exists():
    dotted, paths = architecture_names()
    assert {"kernel.seeds.keyed_seed", "ContainerPool.expect", "relay.max_tokens", "epg_sdk.outcomes"} <= dotted
    assert {"backends/kubernetes/relay.py", "digests.py", "tests/unit/test_workspace_races.py"} <= paths
    first_party = {name for name in dotted if _names_first_party(name)}
    assert {"ContainerPool.expect", "relay.max_tokens"} <= first_party and "http.client" not in first_party
    missing = sorted(name for name in first_party if not _code_exists(name) and not _spec_key_exists(name))
    assert missing == []
    assert sorted(path for path in paths if not _path_exists(path)) == []


def test_the_name_check_refuses_a_function_that_moved_and_a_path_that_does_not_exist():
    assert _code_exists("epg_sdk.outcomes.classify_episode") and not _code_exists("kernel.outcomes.classify_episode")
    assert _code_exists("relay_setup.with_grants") and _code_exists("SandboxTuning.keep_used") and not _code_exists("ContainerPool.no_such")
    assert _spec_key_exists("sandbox.kubernetes.runtime_class_name") and not _spec_key_exists("sandbox.kubernetes.no_such")
    assert _path_exists("backends/kubernetes/relay.py") and not _path_exists("backends/docker/relay.py")
