"""Environment packages and the resolution of benchmark names."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from orchestrator.images.catalogue import DEFAULT_ENVIRONMENTS, CatalogueError, discover, load_package, resolve_benchmark


def write_package(root: Path, name: str, epg_table: str) -> Path:
    directory = root / name
    directory.mkdir(parents=True)
    (directory / "pyproject.toml").write_text(f'[project]\nname = "{name}"\n\n' + textwrap.dedent(epg_table))
    return directory


SINGLE = """\
[tool.epg]
image = "env-single"
module = "epg_env_single"
aliases = ["solo", "One"]

[project.entry-points."epg.benchmarks"]
"Single-v2" = "epg_env_single:make_benchmark"
"""

MULTI = """\
[tool.epg]
image = "env-multi"
module = "epg_env_multi"
aliases = {a = "Alpha-v0", first = "Alpha-v0", b = "Beta-v1"}

[project.entry-points."epg.benchmarks"]
"Alpha-v0" = "epg_env_multi:make_alpha"
"Beta-v1" = "epg_env_multi:make_beta"
"""


@pytest.fixture
def packages(tmp_path):
    write_package(tmp_path, "single", SINGLE)
    write_package(tmp_path, "multi", MULTI)
    (tmp_path / "not-a-package").mkdir()
    (tmp_path / "stray.txt").write_text("ignored")
    return discover([tmp_path], installed=False)


def test_load_package_reads_the_epg_table(tmp_path):
    package = load_package(write_package(tmp_path, "single", SINGLE))
    assert package.image == "env-single"
    assert package.table.module == "epg_env_single"
    assert package.table.aliases == ("solo", "One")
    assert package.table.benchmarks == {"Single-v2": "epg_env_single:make_benchmark"}
    assert package.baseline_dir == tmp_path / "single" / "baseline"
    assert package.lock_file == tmp_path / "single" / "requirements.lock"


def test_discover_finds_only_directories_with_a_pyproject_in_sorted_order(packages, tmp_path):
    assert [p.root for p in packages] == [tmp_path / "multi", tmp_path / "single"]


def test_discover_of_a_missing_root_finds_nothing(tmp_path):
    assert discover([tmp_path / "absent"], installed=False) == []


def test_unknown_key_in_the_epg_table_names_the_field(tmp_path):
    root = write_package(tmp_path, "bad", SINGLE.replace('module = "epg_env_single"', 'module = "epg_env_single"\ncolour = "red"'))
    with pytest.raises(CatalogueError, match=r"tool\.epg\.colour") as info:
        load_package(root)
    assert "pyproject.toml" in str(info.value)


@pytest.mark.parametrize("image", ["Env-Upper", "env_underscore", "-leading", "env/slash", ""])
def test_bad_image_name_is_a_catalogue_error_naming_the_field(tmp_path, image):
    root = write_package(tmp_path, "bad", SINGLE.replace('"env-single"', f'"{image}"'))
    with pytest.raises(CatalogueError, match=r"tool\.epg\.image"):
        load_package(root)


def test_missing_required_field_is_a_catalogue_error(tmp_path):
    root = write_package(tmp_path, "bad", SINGLE.replace('module = "epg_env_single"\n', ""))
    with pytest.raises(CatalogueError, match=r"tool\.epg\.module"):
        load_package(root)


def test_malformed_toml_is_a_catalogue_error(tmp_path):
    root = write_package(tmp_path, "bad", "[tool.epg\n")
    with pytest.raises(CatalogueError, match="pyproject.toml"):
        load_package(root)


def test_discover_propagates_a_malformed_package(tmp_path):
    write_package(tmp_path, "bad", SINGLE.replace("aliases", "alias"))
    with pytest.raises(CatalogueError, match=r"tool\.epg\.alias"):
        discover([tmp_path], installed=False)


def test_resolves_an_exact_id(packages):
    package, benchmark_id, entry = resolve_benchmark("Beta-v1", packages)
    assert (package.image, benchmark_id, entry) == ("env-multi", "Beta-v1", "epg_env_multi:make_beta")


@pytest.mark.parametrize("name", ["single-v2", "SINGLE-V2", "Single-V2"])
def test_resolves_an_id_case_insensitively(packages, name):
    assert resolve_benchmark(name, packages)[1] == "Single-v2"


@pytest.mark.parametrize("name, expected", [("alpha", "Alpha-v0"), ("Beta", "Beta-v1"), ("single", "Single-v2")])
def test_resolves_an_id_without_its_version_suffix(packages, name, expected):
    assert resolve_benchmark(name, packages)[1] == expected


@pytest.mark.parametrize("name", ["solo", "SOLO", "one"])
def test_resolves_an_alias_of_a_single_benchmark_package(packages, name):
    package, benchmark_id, _entry = resolve_benchmark(name, packages)
    assert (package.image, benchmark_id) == ("env-single", "Single-v2")


@pytest.mark.parametrize(("alias", "expected"), [("a", "Alpha-v0"), ("FIRST", "Alpha-v0"), ("b", "Beta-v1")])
def test_a_package_with_several_benchmarks_maps_each_alias_to_its_benchmark(packages, alias, expected):
    assert resolve_benchmark(alias, packages)[1] == expected
    assert load_package(packages[0].root).table.aliases_of(expected) == tuple(a for a, b in packages[0].table.aliases.items() if b == expected)


def test_a_list_of_aliases_on_a_package_with_several_benchmarks_is_an_error(tmp_path):
    write_package(tmp_path, "multi", MULTI.replace('{a = "Alpha-v0", first = "Alpha-v0", b = "Beta-v1"}', '["multi"]'))
    with pytest.raises(CatalogueError, match="a list of aliases needs a package of one Benchmark"):
        load_package(tmp_path / "multi")


def test_an_alias_of_an_unregistered_benchmark_is_an_error(tmp_path):
    write_package(tmp_path, "multi", MULTI.replace('b = "Beta-v1"', 'b = "Gamma-v0"'))
    with pytest.raises(CatalogueError, match="aliases name no registered Benchmark: Gamma-v0"):
        load_package(tmp_path / "multi")


def test_unknown_name_lists_the_known_benchmarks(packages):
    with pytest.raises(CatalogueError) as info:
        resolve_benchmark("Gamma-v0", packages)
    message = str(info.value)
    assert "Gamma-v0" in message
    for known in ("Alpha-v0", "Beta-v1", "Single-v2"):
        assert known in message


def test_unknown_name_among_no_packages_says_none(tmp_path):
    with pytest.raises(CatalogueError, match="none"):
        resolve_benchmark("anything", [])


def test_name_matching_two_benchmarks_is_ambiguous(tmp_path):
    write_package(tmp_path, "a", SINGLE)
    write_package(tmp_path, "b", SINGLE.replace("env-single", "env-other").replace('"Single-v2"', '"Single-v3"'))
    packages = discover([tmp_path], installed=False)
    with pytest.raises(CatalogueError, match="ambiguous") as info:
        resolve_benchmark("single", packages)
    assert "Single-v2" in str(info.value) and "Single-v3" in str(info.value)
    assert resolve_benchmark("single-v3", packages)[1] == "Single-v3"


def test_repository_catalogue_is_discovered_by_default():
    packages = discover()
    assert packages
    assert all(p.root.parent == DEFAULT_ENVIRONMENTS for p in packages)


@pytest.mark.parametrize(
    "name, expected",
    [
        ("cartpole", "CartPole-v1"),
        ("CartPole-v1", "CartPole-v1"),
        ("acrobot", "Acrobot-v1"),
        ("MountainCarContinuous-v0", "MountainCarContinuous-v0"),
    ],
)
def test_repository_catalogue_resolves_the_shipped_benchmarks(name, expected):
    package, benchmark_id, entry = resolve_benchmark(name, discover())
    assert benchmark_id == expected
    assert entry.split(":")[0] == package.table.module
    assert (package.root / package.table.module).is_dir()
