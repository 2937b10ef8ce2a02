"""Discovery of environment packages: source trees at any depth, and installed distributions through entry points."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from orchestrator.images.catalogue import (
    MAX_DEPTH,
    CatalogueError,
    discover,
    find_package_dirs,
    installed_packages,
    resolve_benchmark,
)


def write_package(directory: Path, name: str, benchmarks: dict[str, str], image: str | None = None) -> Path:
    directory.mkdir(parents=True)
    entries = "\n".join(f'"{bid}" = "{entry}"' for bid, entry in benchmarks.items())
    module = next(iter(benchmarks.values())).split(":")[0]
    (directory / "pyproject.toml").write_text(textwrap.dedent(f"""\
        [project]
        name = "{name}"

        [project.entry-points."epg.benchmarks"]
        {entries}

        [tool.epg]
        image = "{image or 'env-' + directory.name}"
        module = "{module}"
        """))
    return directory


def write_distribution(site: Path, name: str, module: str, benchmarks: dict[str, str], source: Path | None = None) -> Path:
    """An installed distribution as pip leaves it: a dist-info with METADATA, entry points and maybe direct_url.json."""
    info = site / f"{name.replace('-', '_')}-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[epg.benchmarks]\n" + "".join(f"{b} = {e}\n" for b, e in benchmarks.items()))
    if source is not None:
        (info / "direct_url.json").write_text(json.dumps({"url": source.as_uri(), "dir_info": {"editable": True}}))
    (site / module).mkdir()
    (site / module / "__init__.py").write_text("")
    return info


def test_packages_are_found_at_every_depth_of_an_ecosystem_suite_leaf_tree(tmp_path):
    write_package(tmp_path / "top", "top", {"Top-v0": "epg_env_top:make"})
    write_package(tmp_path / "gym" / "classic" / "pendulum", "pendulum", {"Pendulum-v1": "epg_env_pendulum:make"})
    write_package(tmp_path / "robotics" / "fetch", "fetch", {"FetchPush-v4": "epg_env_fetch:make"})
    assert find_package_dirs(tmp_path) == [tmp_path / "gym" / "classic" / "pendulum", tmp_path / "robotics" / "fetch", tmp_path / "top"]
    packages = discover([tmp_path], installed=False)
    assert sorted(b for p in packages for b in p.table.benchmarks) == ["FetchPush-v4", "Pendulum-v1", "Top-v0"]
    package, benchmark_id, _ = resolve_benchmark("pendulum", packages)
    assert (benchmark_id, package.image) == ("Pendulum-v1", "env-pendulum")


def test_a_root_that_is_itself_a_package_is_found(tmp_path):
    root = write_package(tmp_path / "solo", "solo", {"Solo-v0": "epg_env_solo:make"})
    assert find_package_dirs(root) == [root]


def test_virtual_environments_node_modules_and_hidden_directories_are_not_searched(tmp_path):
    write_package(tmp_path / "suite" / "real", "real", {"Real-v0": "epg_env_real:make"})
    for skipped in (".venv", "node_modules", ".git", "suite/.hidden"):
        write_package(tmp_path / skipped / "pkg", "pkg", {"Hidden-v0": "epg_env_hidden:make"})
    assert find_package_dirs(tmp_path) == [tmp_path / "suite" / "real"]


def test_a_package_below_the_depth_bound_is_not_found(tmp_path):
    deep = tmp_path.joinpath(*[f"level{i}" for i in range(MAX_DEPTH)], "pkg")
    write_package(deep, "deep", {"Deep-v0": "epg_env_deep:make"})
    write_package(tmp_path / "a" / "b" / "c" / "d", "shallow", {"Shallow-v0": "epg_env_shallow:make"})
    assert find_package_dirs(tmp_path) == [tmp_path / "a" / "b" / "c" / "d"]


def test_a_package_inside_a_package_is_not_searched(tmp_path):
    outer = write_package(tmp_path / "outer", "outer", {"Outer-v0": "epg_env_outer:make"})
    write_package(outer / "vendored" / "inner", "inner", {"Inner-v0": "epg_env_inner:make"})
    assert find_package_dirs(tmp_path) == [outer]


def test_a_pyproject_without_an_epg_table_is_a_folder_to_search_not_a_package(tmp_path):
    (tmp_path / "suite").mkdir()
    (tmp_path / "suite" / "pyproject.toml").write_text('[project]\nname = "suite-tools"\n')
    write_package(tmp_path / "suite" / "leaf", "leaf", {"Leaf-v0": "epg_env_leaf:make"})
    assert find_package_dirs(tmp_path) == [tmp_path / "suite" / "leaf"]


def test_benchmarks_in_the_old_tool_epg_table_are_refused_with_the_new_place(tmp_path):
    directory = tmp_path / "old"
    directory.mkdir()
    (directory / "pyproject.toml").write_text(
        '[tool.epg]\nimage = "env-old"\nmodule = "epg_env_old"\n[tool.epg.benchmarks]\n"Old-v0" = "epg_env_old:make"\n'
    )
    with pytest.raises(CatalogueError, match=r'tool\.epg\.benchmarks: .*entry-points\."epg\.benchmarks"'):
        discover([tmp_path], installed=False)


def test_a_package_registering_no_benchmark_is_a_catalogue_error(tmp_path):
    directory = tmp_path / "empty"
    directory.mkdir()
    (directory / "pyproject.toml").write_text('[tool.epg]\nimage = "env-empty"\nmodule = "epg_env_empty"\n')
    with pytest.raises(CatalogueError, match=r"project\.entry-points\.epg\.benchmarks: no Benchmark"):
        discover([tmp_path], installed=False)


def test_an_installed_distribution_is_found_through_its_entry_points(tmp_path, monkeypatch):
    site = tmp_path / "site"
    write_distribution(site, "epg-env-fake", "epg_env_fake", {"Fake-v0": "epg_env_fake:make_benchmark", "Fake-v1": "epg_env_fake:make_v1"})
    monkeypatch.syspath_prepend(str(site))
    [package] = [p for p in installed_packages() if p.table.module == "epg_env_fake"]
    assert package.table.benchmarks == {"Fake-v0": "epg_env_fake:make_benchmark", "Fake-v1": "epg_env_fake:make_v1"}
    assert package.image == "env-fake"
    assert package.root == site
    found = discover([tmp_path / "no-sources"])
    assert resolve_benchmark("fake-v1", found)[2] == "epg_env_fake:make_v1"
    assert not [p for p in discover([tmp_path / "no-sources"], installed=False) if p.table.module == "epg_env_fake"]


def test_a_distribution_installed_from_a_source_directory_is_read_from_its_pyproject(tmp_path, monkeypatch):
    source = write_package(tmp_path / "src" / "local", "epg-env-local", {"Local-v0": "epg_env_local:make"}, image="env-from-pyproject")
    site = tmp_path / "site"
    write_distribution(site, "epg-env-local", "epg_env_local", {"Local-v0": "epg_env_local:make"}, source=source)
    monkeypatch.syspath_prepend(str(site))
    [package] = [p for p in installed_packages() if p.table.module == "epg_env_local"]
    assert (package.root, package.image) == (source, "env-from-pyproject")


def test_a_package_found_in_a_source_tree_and_installed_is_listed_once(tmp_path, monkeypatch):
    source = write_package(tmp_path / "src" / "twice", "epg-env-twice", {"Twice-v0": "epg_env_twice:make"})
    site = tmp_path / "site"
    write_distribution(site, "epg-env-twice", "epg_env_twice", {"Twice-v0": "epg_env_twice:make"})  # a plain (copied) install
    monkeypatch.syspath_prepend(str(site))
    packages = [p for p in discover([tmp_path / "src"]) if "Twice-v0" in p.table.benchmarks]
    assert [p.root for p in packages] == [source]
    assert resolve_benchmark("twice", discover([tmp_path / "src"]))[0].root == source
