"""Finding and constructing the Benchmarks an EvoPolicyGym package exports, and the entries that name them.

Their packages have no entry points: a package exports Benchmark classes, each
constructed with no argument for its default Benchmark, and often with a
typed config dataclass for others (`DoorKeyBenchmark(DoorKeyConfig(profile="16x16"))`).
An entry names one: `module:Attribute` calls Attribute (a class or a factory)
with no argument; `module:Attribute?profile=NAME` constructs the class with its
config whose profile field is NAME. The profile field is the config's
`profile`, else its one field ending in `_profile`, else its one str field
whose default is in a `*_PROFILES` (or `PROFILES`) tuple of the package (Atari's
`game`). The profiles listed for a class come from the first of these that holds
the field's default: a `*_PROFILES` or `PROFILES` tuple the package exports, the `Literal` values
of the field's annotation, the `_PROFILES` table of the config's module.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import typing
from types import ModuleType
from typing import Any
from urllib.parse import parse_qsl

from epg_sdk.benchmark import Benchmark
from epg_sdk.evopolicygym.adapter import EvoPolicyGymBenchmark, is_structural_benchmark


class EntryError(ValueError):
    """An entry that names no Benchmark: malformed, an unknown query key, or a profile the class cannot take."""


def parse_entry(entry: str) -> tuple[str, str, str | None]:
    """Return the module, attribute and profile (or None) of "module:Attribute[?profile=NAME]".

    Raises EntryError for a malformed entry or a query with any key but one profile.
    """
    target, _, query = entry.partition("?")
    module_name, colon, attribute = target.partition(":")
    if not module_name or not colon or not attribute:
        raise EntryError(f"entry {entry!r} is not module:Attribute[?profile=NAME]")
    profile = None
    if query:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=True) if "=" in query else [("", query)]
        if len(pairs) != 1 or pairs[0][0] != "profile" or not pairs[0][1]:
            raise EntryError(f"entry {entry!r}: the only query an entry takes is profile=NAME")
        profile = pairs[0][1]
    return module_name, attribute, profile


def construct(entry: str) -> Any:
    """Return the object entry names: Attribute() or, with a profile, Attribute(Config(field=profile)).

    Raises EntryError when the profile cannot be given to Attribute; whatever importing or constructing raises
    passes through.
    """
    module_name, attribute, profile = parse_entry(entry)
    target = getattr(importlib.import_module(module_name), attribute)
    if profile is None:
        return target() if callable(target) else target
    if not isinstance(target, type):
        raise EntryError(f"{module_name}:{attribute} is not a class: it takes no profile")
    config_class = config_class_of(target)
    field = profile_field(config_class, importlib.import_module(module_name)) if config_class else None
    if config_class is None or field is None:
        raise EntryError(f"{module_name}:{attribute} has no config with a profile field")
    return target(config_class(**{field: profile}))


def load(entry: str) -> Benchmark:
    """Return our Benchmark for entry: what construct(entry) gives, wrapped in EvoPolicyGymBenchmark when it has
    their structural interface. Raises TypeError when it is neither, EntryError for a malformed entry."""
    benchmark = construct(entry)
    if isinstance(benchmark, Benchmark):
        return benchmark
    if is_structural_benchmark(benchmark):
        return EvoPolicyGymBenchmark(benchmark)
    raise TypeError(f"{entry} returned {type(benchmark).__name__}, not a Benchmark")


def config_class_of(cls: type) -> type | None:
    """Return the dataclass cls's constructor takes as its first argument (`config: XConfig | None = None`), or None."""
    try:
        parameters = list(inspect.signature(cls).parameters.values())
    except (TypeError, ValueError):
        return None
    if not parameters or parameters[0].kind not in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
        return None
    annotation = parameters[0].annotation
    namespace = vars(importlib.import_module(cls.__module__))
    candidates = [annotation] if not isinstance(annotation, str) else []
    if isinstance(annotation, str):
        candidates = [namespace.get(part.strip()) for part in annotation.split("|")]
    else:
        candidates = [annotation, *typing.get_args(annotation)]
    for candidate in candidates:
        if isinstance(candidate, type) and dataclasses.is_dataclass(candidate):
            return candidate
    return None


def _exported_profile_tuples(package: ModuleType) -> list[tuple[str, ...]]:
    found = []
    for name in dir(package):
        value = getattr(package, name)
        if (name == "PROFILES" or name.endswith("_PROFILES")) and isinstance(value, tuple) and value and all(isinstance(item, str) for item in value):
            found.append(value)
    return found


def profile_field(config_class: type, package: ModuleType) -> str | None:
    """Return the name of config_class's profile field (see the module's docstring), or None."""
    fields = {field.name: field for field in dataclasses.fields(config_class)}
    if "profile" in fields:
        return "profile"
    suffixed = [name for name in fields if name.endswith("_profile")]
    if len(suffixed) == 1:
        return suffixed[0]
    tuples = _exported_profile_tuples(package)
    matching = [name for name, field in fields.items() if isinstance(field.default, str) and any(field.default in t for t in tuples)]
    return matching[0] if len(matching) == 1 else None


def profiles_of(config_class: type, field_name: str, package: ModuleType) -> tuple[str, ...]:
    """Return the profile names config_class's field takes (see the module's docstring); () when none are listed.

    Each source counts only when it holds the field's default.
    """
    default = next(f for f in dataclasses.fields(config_class) if f.name == field_name).default
    for listed in _exported_profile_tuples(package):
        if default in listed:
            return listed
    literal = _literal_values(config_class, field_name)
    if default in literal:
        return literal
    table = getattr(importlib.import_module(config_class.__module__), "_PROFILES", None)
    if isinstance(table, (dict, tuple)) and default in table and all(isinstance(name, str) for name in table):
        return tuple(table)
    return ()


def _literal_values(config_class: type, field_name: str) -> tuple[str, ...]:
    try:
        annotation = typing.get_type_hints(config_class).get(field_name)
    except Exception:  # an annotation their Python evaluates and ours cannot: no profiles from it
        return ()
    annotation = getattr(annotation, "__value__", annotation)  # a `type X = Literal[...]` alias
    if typing.get_origin(annotation) is typing.Literal:
        return tuple(value for value in typing.get_args(annotation) if isinstance(value, str))
    return ()


def benchmark_classes(package: ModuleType) -> list[str]:
    """Return the names (in the package's `__all__` order, else sorted) of the classes it exports whose
    instances have the structural interface of an EvoPolicyGym Benchmark."""
    names = getattr(package, "__all__", None) or sorted(name for name in dir(package) if not name.startswith("_"))
    found = []
    for name in names:
        value = getattr(package, name, None)
        if isinstance(value, type) and all(callable(getattr(value, method, None)) for method in ("episodes", "make_environment", "feedback")):
            found.append(name)
    return found


def discover(module_name: str, problems: list[str] | None = None) -> list[dict[str, Any]]:
    """Return every Benchmark module_name exports: {"id", "entry", "class", "profile"} for each class's default
    Benchmark (profile: the default's, or None) and for each of its other profiles.

    Profiles of one class often share an id (their MiniGrid packages name the family, and the profile is in the
    environment parameters): the first keeps the id and each other is listed as "ID@PROFILE"; its entry says which
    profile it is. A class or profile that cannot be
    constructed is left out, and why is appended to problems. Raises what importing module_name raises.
    """
    package = importlib.import_module(module_name)
    problems = [] if problems is None else problems
    found: list[dict[str, Any]] = []
    for name in benchmark_classes(package):
        cls = getattr(package, name)
        config_class = config_class_of(cls)
        field = profile_field(config_class, package) if config_class else None
        default_profile = None
        if config_class is not None and field is not None:
            default = next(f for f in dataclasses.fields(config_class) if f.name == field).default
            default_profile = default if isinstance(default, str) else None
        try:
            benchmark = cls()
            if not is_structural_benchmark(benchmark):
                raise TypeError("its instance is not a Benchmark")
            found.append({"id": benchmark.spec.id, "entry": f"{module_name}:{name}", "class": name, "profile": default_profile})
        except Exception as exc:
            problems.append(f"{module_name}:{name}: {type(exc).__name__}: {exc}")
        if config_class is None or field is None:
            continue
        for profile in profiles_of(config_class, field, package):
            if profile == default_profile:
                continue
            entry = f"{module_name}:{name}?profile={profile}"
            try:
                spec_id = cls(config_class(**{field: profile})).spec.id
            except Exception as exc:
                problems.append(f"{entry}: {type(exc).__name__}: {exc}")
                continue
            found.append({"id": spec_id, "entry": entry, "class": name, "profile": profile})
    return _with_unique_ids(found)


def _with_unique_ids(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """found with every id unique, as a catalogue needs: the first Benchmark of an id keeps it, a later one of the same id
    is named "ID@PROFILE" (their MiniGrid profiles share the family's id), or "ID@CLASS" without a profile."""
    seen: set[str] = set()
    unique: list[dict[str, Any]] = []
    for row in found:
        name = row["id"]
        if name in seen:
            name = f"{row['id']}@{row['profile'] or row['class']}"
        seen.add(name)
        unique.append({**row, "id": name})
    return unique
