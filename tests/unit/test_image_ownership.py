"""Which outdated images `images prune` may remove (only this checkout's, environment images only of its catalogue), the
labels the builder puts on what it builds, and when it builds a parent image."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from docker.errors import ImageNotFound

from orchestrator.backends.labels import CHECKOUT, IMAGE, MANAGED, PACKAGE
from orchestrator.images.builder import ImageBuilder
from orchestrator.images.catalogue import CatalogueError
from orchestrator.images.ownership import Ledger, path_id, reason_to_keep

OURS = "a" * 16


def test_an_image_of_this_checkout_may_be_removed():
    assert reason_to_keep({MANAGED: "true", CHECKOUT: OURS}, checkout=OURS, packages=set()) is None
    assert reason_to_keep({MANAGED: "true", CHECKOUT: OURS, PACKAGE: "p1"}, checkout=OURS, packages={"p1", "p2"}) is None


def test_an_image_of_another_checkout_is_kept_naming_that_checkout():
    reason = reason_to_keep({MANAGED: "true", CHECKOUT: "b" * 16}, checkout=OURS, packages=set())
    assert reason == f"built by another checkout ({CHECKOUT}={'b' * 16})"


def test_an_image_without_a_checkout_label_is_kept():
    assert reason_to_keep({MANAGED: "true"}, checkout=OURS, packages=set()).startswith("no checkout label")
    assert reason_to_keep(None, checkout=OURS, packages=set()).startswith("no checkout label")


def test_an_environment_image_of_a_package_outside_the_catalogue_is_kept():
    reason = reason_to_keep({MANAGED: "true", CHECKOUT: OURS, PACKAGE: "p3"}, checkout=OURS, packages={"p1"})
    assert reason.startswith("built from an environment package outside this catalogue") and "--environments" in reason


def test_an_image_another_living_checkout_last_found_current_is_kept_naming_that_checkout(tmp_path):
    (tmp_path / "other").mkdir()
    Ledger(tmp_path / "ledger", tmp_path / "other").record({"env-x": "epg/env-x:1111", "env-y": "epg/env-y:2222"})
    Ledger(tmp_path / "ledger", tmp_path / "other").record({"env-y": "epg/env-y:3333"})  # env-y's tag moved on
    Ledger(tmp_path / "ledger", tmp_path / "gone").record({"env-z": "epg/env-z:4444"})  # a checkout since deleted
    ours = Ledger(tmp_path / "ledger", tmp_path / "ours")
    ours.record({"env-w": "epg/env-w:5555"})
    elsewhere = ours.used_elsewhere()
    assert elsewhere == {"epg/env-x:1111": str(tmp_path / "other"), "epg/env-y:3333": str(tmp_path / "other")}
    labels = {MANAGED: "true", CHECKOUT: path_id(tmp_path / "ours")}
    reason = reason_to_keep(labels, ["epg/env-x:1111"], checkout=path_id(tmp_path / "ours"), packages=set(), elsewhere=elsewhere)
    assert reason == f"epg/env-x:1111 is current for the checkout at {tmp_path / 'other'}"
    for tag in ("epg/env-y:2222", "epg/env-z:4444", "epg/env-w:5555"):
        assert reason_to_keep(labels, [tag], checkout=path_id(tmp_path / "ours"), packages=set(), elsewhere=elsewhere) is None


def test_a_path_is_known_by_where_it_resolves(tmp_path):
    (tmp_path / "checkout").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "checkout", target_is_directory=True)
    assert path_id(tmp_path / "link") == path_id(tmp_path / "checkout") == path_id(tmp_path / "checkout" / ".." / "checkout")
    assert path_id(tmp_path / "checkout") != path_id(tmp_path) and len(path_id(tmp_path)) == 16


def _package(root, image: str):
    (root / "epg_env_x").mkdir(parents=True)
    (root / "epg_env_x" / "__init__.py").write_text("def make():\n    raise NotImplementedError\n")
    (root / "pyproject.toml").write_text(
        f'[project]\nname = "epg-env-x"\nversion = "0.1.0"\n\n[tool.epg]\nimage = "{image}"\nmodule = "epg_env_x"\n\n'
        '[project.entry-points."epg.benchmarks"]\n"X-v0" = "epg_env_x:make"\n'
    )
    return root


class _Engine:
    """Just enough of a docker client for ImageBuilder.build: the base and the references in present exist."""

    def __init__(self) -> None:
        self.present = {"sha256:base"}
        self.images = SimpleNamespace(get=self._get)

    def _get(self, reference: str):
        if reference in self.present:
            return SimpleNamespace(id="sha256:" + reference.rpartition(":")[2])
        raise ImageNotFound(reference)


def test_every_image_the_builder_makes_names_its_checkout_and_an_environment_image_its_package(tmp_path, monkeypatch):
    package = _package(tmp_path / "envs" / "x", "env-x")
    builder = ImageBuilder(_Engine(), base="sha256:base", environments=[tmp_path / "envs"], checkout=tmp_path / "checkout",  # type: ignore[arg-type]
                           cache_dir=tmp_path / "cache")
    built: dict[str, dict[str, str]] = {}
    monkeypatch.setattr(builder, "write_context", lambda recipe, directory: SimpleNamespace(directory=directory, build_args={}))
    monkeypatch.setattr(builder, "_docker_build", lambda context, tag, args, labels: built.__setitem__(tag.split(":")[0], labels))
    builder.build(builder.recipes()["env-x"])
    assert set(built) == {"epg/env-sdk", "epg/env-x"}  # the layer first, as the environment image's BASE
    assert built["epg/env-x"][CHECKOUT] == built["epg/env-sdk"][CHECKOUT] == path_id(tmp_path / "checkout")
    assert built["epg/env-x"][PACKAGE] == path_id(package) and PACKAGE not in built["epg/env-sdk"]
    assert built["epg/env-x"][MANAGED] == "true" and built["epg/env-x"][IMAGE] == "env-x"


def test_a_package_may_not_take_the_name_of_a_built_in_image(tmp_path):
    _package(tmp_path / "envs" / "x", "env-sdk")
    with pytest.raises(CatalogueError, match="tool.epg.image: env-sdk is the name of a built-in image"):
        ImageBuilder(_Engine(), base="sha256:base", environments=[tmp_path / "envs"], cache_dir=tmp_path / "cache").recipes()  # type: ignore[arg-type]


def test_an_image_found_under_its_tag_needs_no_parent_image(tmp_path, monkeypatch):
    _package(tmp_path / "envs" / "x", "env-x")
    engine = _Engine()
    builder = ImageBuilder(engine, base="sha256:base", environments=[tmp_path / "envs"], cache_dir=tmp_path / "cache")  # type: ignore[arg-type]
    tag = builder.tag_of(builder.recipes()["env-x"])
    engine.present.add(tag)  # env-x pulled alone: env-sdk absent
    built: list[str] = []
    monkeypatch.setattr(builder, "_docker_build", lambda context, tag, args, labels: built.append(tag))
    result = builder.build(builder.recipes()["env-x"])
    assert (result.tag, result.built, built) == (tag, False, [])
