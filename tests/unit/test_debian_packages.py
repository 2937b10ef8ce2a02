"""Debian packages of environment images: apt output parsed, the closure taken on top of the base, the tag kept honest."""

from __future__ import annotations

import io
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest

from orchestrator.images.builder import ImageBuilder
from orchestrator.images.catalogue import CatalogueError, EpgTable, load_package
from orchestrator.images.debian import Alternative, DebianPackage, HostApt, closure, parse_depends, parse_show, parse_status, resolve
from orchestrator.images.recipes import ImageRecipe, environment_recipe
from orchestrator.kernel.infrastructure import InfraErrorCode, InfrastructureError

DEPENDS = """\
libosmesa6
  Depends: libc6
  PreDepends: libzstd1:amd64
  Depends: libglapi-mesa
libpam-runtime
 |Depends: debconf
  Depends: <debconf-2.0>
    cdebconf
    debconf
  Depends: libpam-modules
<debconf-2.0>
"""

# package -> (version, Depends lines as apt-cache depends prints them)
ARCHIVE = {
    "libosmesa6": ("22.3.6-1+deb12u2", ["  Depends: libc6", "  Depends: libglapi-mesa", "  Depends: libllvm15:amd64"]),
    "libglapi-mesa": ("22.3.6-1+deb12u2", ["  Depends: libc6"]),
    "libllvm15": ("1:15.0.6-4+b1", ["  Depends: libc6", " |Depends: libedit2", "  Depends: <libedit-virtual>", "    libedit2"]),
    "libedit2": ("3.1-20221030-2", ["  Depends: libbsd0"]),
    "libbsd0": ("0.11.7-2", ["  Depends: libc6"]),
    "libc6": ("2.36-9+deb12u14", []),
}


@dataclass
class FakeApt:
    """apt-cache over ARCHIVE; versions overrides a candidate."""

    versions: dict[str, str] = field(default_factory=dict)
    asked: list[list[str]] = field(default_factory=list)

    def fingerprint(self) -> str:
        return ";".join(f"{name}={version}" for name, version in sorted(self.versions.items())) or "lists-1"

    def depends(self, names: list[str]) -> str:
        self.asked.append(list(names))
        return "".join(f"{name}\n" + "".join(line + "\n" for line in ARCHIVE[name][1]) for name in names if name in ARCHIVE)

    def show(self, names: list[str]) -> str:
        return "\n".join(
            f"Package: {name}\nVersion: {self.versions.get(name, ARCHIVE[name][0])}\nArchitecture: amd64\nDescription: x\n continued\n"
            for name in names if name in ARCHIVE
        )


def test_depends_output_is_parsed_with_virtual_packages_alternatives_and_architecture_suffixes():
    parsed = parse_depends(DEPENDS)
    assert set(parsed) == {"libosmesa6", "libpam-runtime"}  # a virtual package's own section is no package
    assert parsed["libosmesa6"] == [(Alternative(name="libc6"),), (Alternative(name="libzstd1"),), (Alternative(name="libglapi-mesa"),)]
    first, second = parsed["libpam-runtime"]
    assert first == (Alternative(name="debconf"), Alternative(name="debconf-2.0", providers=("cdebconf", "debconf")))
    assert second == (Alternative(name="libpam-modules"),)


def test_the_closure_follows_depends_and_leaves_out_what_the_base_has():
    wanted = closure(("libosmesa6",), frozenset({"libc6"}), FakeApt())
    assert sorted(wanted) == ["libbsd0", "libedit2", "libglapi-mesa", "libllvm15", "libosmesa6"]
    assert closure(("libosmesa6",), frozenset({"libc6", "libglapi-mesa", "libllvm15"}), FakeApt()) == ["libosmesa6"]
    assert closure(("libc6",), frozenset({"libc6"}), FakeApt()) == []


def test_an_alternative_the_base_has_satisfies_its_dependency():
    wanted = closure(("libllvm15",), frozenset({"libc6"}), FakeApt())
    assert wanted == ["libllvm15", "libedit2", "libbsd0"]
    apt = FakeApt()
    assert closure(("libllvm15",), frozenset({"libc6", "libedit2"}), apt) == ["libllvm15"]
    assert apt.asked == [["libllvm15"]]


def test_resolution_pins_candidate_versions_and_names_the_files_apt_get_download_writes():
    packages = resolve(("libosmesa6",), frozenset({"libc6", "libedit2", "libbsd0"}), FakeApt())
    assert [package.pin for package in packages] == ["libglapi-mesa=22.3.6-1+deb12u2", "libllvm15=1:15.0.6-4+b1", "libosmesa6=22.3.6-1+deb12u2"]
    assert packages[1].filename == "libllvm15_1%3a15.0.6-4+b1_amd64.deb"


def test_a_package_apt_does_not_know_is_an_infrastructure_error_that_says_to_update():
    with pytest.raises(InfrastructureError) as raised:
        resolve(("libosmesa6", "no-such-package"), frozenset(), FakeApt())
    assert raised.value.code is InfraErrorCode.IMAGE_BUILD_FAILED
    assert "no-such-package" in str(raised.value) and "apt-get update" in str(raised.value)


def test_a_dependency_nothing_provides_is_an_infrastructure_error():
    with pytest.raises(InfrastructureError, match="no Debian package provides ghost"):
        closure(("x",), frozenset(), SimpleNamespace(depends=lambda names: "x\n  Depends: <ghost>\n", show=None))


def test_show_records_give_name_version_and_architecture():
    text = ("Package: tzdata\nVersion: 2025b-0+deb12u1\nArchitecture: all\nDescription: time zones\n more\n\n"
            "Package: tzdata\nVersion: 2024a\nArchitecture: all\n")
    assert parse_show(text) == {"tzdata": DebianPackage(name="tzdata", version="2025b-0+deb12u1", architecture="all")}


def test_the_base_lists_only_packages_dpkg_says_are_installed():
    status = ("Package: libc6\nStatus: install ok installed\nVersion: 2.36\n\n"
              "Package: old\nStatus: deinstall ok config-files\n\nPackage: zlib1g\nStatus: install ok installed\n")
    assert parse_status(status) == frozenset({"libc6", "zlib1g"})


@pytest.fixture
def recipe_files(tmp_path):
    (tmp_path / "Dockerfile").write_bytes(b"FROM base\nCOPY debs /tmp/epg-debs\n")
    (tmp_path / "a.py").write_bytes(b"A = 1\n")
    return tmp_path


def recipe(root: Path, **overrides) -> ImageRecipe:
    fields = dict(name="thing", dockerfile=root / "Dockerfile", requirements=("numpy==2.4.6",), files={"pkg/a.py": root / "a.py"}, labels={"k": "v"})
    return ImageRecipe(**{**fields, **overrides})


def test_without_debian_packages_the_inputs_hash_is_the_one_of_before(recipe_files):
    # computed with the recipe of before tool.epg.debian, over the same inputs
    assert recipe(recipe_files).inputs_hash("sha256:base") == "9e127db41c6995b038c25df0f44945d1669bb490b0742b301808ae8ea45481c3"


def test_the_inputs_hash_changes_with_the_debian_list_and_the_resolved_versions(recipe_files):
    plain = recipe(recipe_files).inputs_hash("base")
    osmesa = recipe(recipe_files, debian=("libosmesa6",), debian_files=("libosmesa6_22.3.6-1+deb12u2_amd64.deb",)).inputs_hash("base")
    newer = recipe(recipe_files, debian=("libosmesa6",), debian_files=("libosmesa6_22.3.6-1+deb12u3_amd64.deb",)).inputs_hash("base")
    more = recipe(recipe_files, debian=("libosmesa6", "libegl1"), debian_files=("libosmesa6_22.3.6-1+deb12u2_amd64.deb",)).inputs_hash("base")
    assert len({plain, osmesa, newer, more}) == 4
    assert recipe(recipe_files, debian=("libosmesa6",), debian_files=("libosmesa6_22.3.6-1+deb12u2_amd64.deb",)).inputs_hash("base") == osmesa


def table(**fields) -> dict:
    return {"image": "env-x", "module": "x", "benchmarks": {"X-v0": "x:make"}, **fields}


def test_the_epg_table_takes_a_list_of_debian_package_names():
    assert EpgTable.model_validate(table(debian=["libosmesa6", "libstdc++6"])).debian == ("libosmesa6", "libstdc++6")
    assert EpgTable.model_validate(table()).debian == ()


@pytest.mark.parametrize("value", ["libosmesa6", [1], ["libosmesa6 libegl1"], ["LibOSMesa6"], {"libosmesa6": "*"}])
def test_the_epg_table_rejects_debian_values_that_are_not_a_list_of_package_names(value):
    with pytest.raises(ValueError):
        EpgTable.model_validate(table(debian=value))


PYPROJECT = """[project]
name = "epg-env-x"
version = "0.1.0"

[project.entry-points."epg.benchmarks"]
"X-v0" = "epg_env_x:make"

[tool.epg]
image = "env-x"
module = "epg_env_x"
{extra}
"""


def write_package(root: Path, extra: str) -> Path:
    (root / "epg_env_x").mkdir(parents=True)
    (root / "epg_env_x" / "__init__.py").write_text("def make():\n    raise NotImplementedError\n")
    (root / "pyproject.toml").write_text(PYPROJECT.format(extra=extra))
    return root


def test_a_package_names_its_debian_packages_and_its_recipe_carries_them(tmp_path):
    package = load_package(write_package(tmp_path / "x", 'debian = ["libosmesa6"]'))
    assert environment_recipe(package).debian == ("libosmesa6",)
    with pytest.raises(CatalogueError, match="tool.epg.debian"):
        load_package(write_package(tmp_path / "y", 'debian = "libosmesa6"'))


class FakeContainer:
    def __init__(self, removed: list[str]) -> None:
        self._removed = removed

    def get_archive(self, path: str):
        data = b"Package: libc6\nStatus: install ok installed\n\nPackage: libbsd0\nStatus: install ok installed\n"
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as archive:
            info = tarfile.TarInfo("status")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        return [buffer.getvalue()], {}

    def remove(self, force: bool = False, v: bool = False) -> None:  # docker-py's Container.remove
        self._removed.append("status-reader")


@dataclass
class FakeClient:
    created: list[dict] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.images = SimpleNamespace(get=lambda reference: SimpleNamespace(id="sha256:base"))
        self.containers = SimpleNamespace(create=self._create)

    def _create(self, image: str, **options) -> FakeContainer:
        self.created.append({"image": image, **options})
        return FakeContainer(self.removed)


def test_the_builder_tags_over_the_resolved_files_and_reads_each_base_once(tmp_path):
    write_package(tmp_path / "x", 'debian = ["libosmesa6"]')
    client = FakeClient()
    cache = tmp_path / "cache"
    builder = ImageBuilder(client, base="sha256:base", environments=[tmp_path / "x"], apt=FakeApt(), cache_dir=cache)  # type: ignore[arg-type]
    recipe = builder.recipes()["env-x"]
    resolved = builder.resolved(recipe)
    assert resolved.debian_files == (
        "libedit2_3.1-20221030-2_amd64.deb", "libglapi-mesa_22.3.6-1+deb12u2_amd64.deb",
        "libllvm15_1%3a15.0.6-4+b1_amd64.deb", "libosmesa6_22.3.6-1+deb12u2_amd64.deb",
    )
    tag = builder.tag_of(recipe)
    parent = builder.tag_of(builder.recipes()["env-sdk"])  # the SDK layer's tag is BASE; its packages are the base image's
    assert tag == resolved.tag(parent) != recipe.tag(parent)
    assert len(client.created) == 1 and client.removed == ["status-reader"]  # one labelled reader, removed
    assert client.created[0]["image"] == "sha256:base"
    assert client.created[0]["labels"]["org.evopolicygym.managed"] == "true"
    newer = ImageBuilder(FakeClient(), base="sha256:base", environments=[tmp_path / "x"], cache_dir=cache,  # type: ignore[arg-type]
                         apt=FakeApt(versions={"libglapi-mesa": "22.3.6-1+deb12u3"}))
    assert newer.tag_of(newer.recipes()["env-x"]) != tag

    # The next command with the host's lists as they were reads the resolution from the cache: no apt-cache, no container.
    again_client, again_apt = FakeClient(), FakeApt()
    again = ImageBuilder(again_client, base="sha256:base", environments=[tmp_path / "x"], apt=again_apt, cache_dir=cache)  # type: ignore[arg-type]
    assert again.tag_of(again.recipes()["env-x"]) == tag and again_client.created == [] and again_apt.asked == []


def test_the_host_apt_fingerprint_changes_with_its_package_lists(tmp_path):
    lists = tmp_path / "lists"
    lists.mkdir()
    (lists / "deb.debian.org_debian_dists_bookworm_main_binary-amd64_Packages.lz4").write_bytes(b"one")
    (lists / "lock").write_bytes(b"")
    apt = HostApt(lists)
    first = apt.fingerprint()
    assert first.startswith("deb.debian.org_debian_dists_bookworm_main_binary-amd64_Packages.lz4:3:") and "lock" not in first
    (lists / "deb.debian.org_debian_dists_bookworm_main_binary-amd64_Packages.lz4").write_bytes(b"newer")
    assert apt.fingerprint() != first
    assert HostApt(tmp_path / "absent").fingerprint() == ""
