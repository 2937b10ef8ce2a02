"""Debian packages in environment images: resolved and downloaded on the host, installed by dpkg in one shared layer.

Two tiny environment packages name the same `[tool.epg] debian` list; their images are built
for this test and removed after it.
"""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from orchestrator.backends.labels import LabelSet, owner_id
from orchestrator.images.builder import ImageBuilder

OSMESA = "/usr/lib/x86_64-linux-gnu/libOSMesa.so.8"

PYPROJECT = '''[project]
name = "epg-env-{name}"
version = "0.1.0"
dependencies = ["epg-sdk==0.1.0"]

[project.entry-points."epg.benchmarks"]
"{title}-v0" = "{module}:make_benchmark"

[tool.epg]
image = "env-{name}"
module = "{module}"
debian = ["libosmesa6"]
'''


def write_package(root: Path, name: str) -> None:
    module = name.replace("-", "_")
    (root / module).mkdir(parents=True)
    (root / "pyproject.toml").write_text(PYPROJECT.format(name=name, title=name.title().replace("-", ""), module=module))
    source = f'"""{name}: no Benchmark behind it, only an image."""\n\n\ndef make_benchmark():\n    raise NotImplementedError\n'
    (root / module / "__init__.py").write_text(source)


@pytest.fixture(scope="module")
def debian_images(engine, tmp_path_factory):
    """Build env-debian-probe-a and -b (same Debian list, different modules); remove them afterwards."""
    root = tmp_path_factory.mktemp("debian-packages")
    for name in ("debian-probe-a", "debian-probe-b"):
        write_package(root / name, name)
    builder = ImageBuilder(engine.client, environments=[root], progress=print)
    results = builder.ensure(["env-debian-probe-a", "env-debian-probe-b"])
    yield builder, {result.name: result.tag for result in results}
    for result in results:
        engine.client.images.remove(result.tag, force=True)


def test_the_image_has_the_named_debian_package_installed(engine, debian_images, scope):
    _builder, tags = debian_images
    labels = LabelSet(sandbox=secrets.token_hex(6), owner=owner_id(), scope=scope).for_role("test")
    command = f"ls {OSMESA}; dpkg-query -W -f '${{Status}}\\n' libosmesa6; ls /tmp"
    container = engine.client.containers.create(tags["env-debian-probe-a"], ["sh", "-c", command], labels=labels, network_disabled=True)
    try:
        container.start()
        assert container.wait(timeout=60)["StatusCode"] == 0
        output = container.logs(stdout=True, stderr=True).decode()
    finally:
        container.remove(force=True)
    assert OSMESA in output
    assert "install ok installed" in output
    assert "epg-debs" not in output


def test_the_resolution_pins_the_closure_minus_the_base(debian_images):
    builder, _tags = debian_images
    recipe = builder.recipes()["env-debian-probe-a"]
    packages = {package.name: package for package in builder.debian_packages(recipe)}
    assert {"libosmesa6", "libglapi-mesa"} <= set(packages)
    assert "libc6" not in packages  # the base has it
    assert builder.resolved(recipe).debian_files == tuple(package.filename for package in sorted(packages.values(), key=lambda p: p.name))


def test_images_with_the_same_debian_packages_share_the_dpkg_layer(engine, debian_images):
    builder, tags = debian_images
    # the layers below an environment image's own: the SDK layer's (its BASE), which start with the base image's
    below = engine.client.images.get(builder.tag_of(builder.recipes()["env-sdk"])).attrs["RootFS"]["Layers"]
    base_layers = engine.client.images.get(builder.base_id()).attrs["RootFS"]["Layers"]
    first, second = (engine.client.images.get(tags[name]).attrs["RootFS"]["Layers"] for name in ("env-debian-probe-a", "env-debian-probe-b"))
    assert below[: len(base_layers)] == base_layers and len(below) > len(base_layers)
    assert first[: len(below)] == second[: len(below)] == below
    assert first[len(below) : len(below) + 2] == second[len(below) : len(below) + 2]  # COPY debs, RUN dpkg -i
    assert first != second  # the images differ after it
    (dpkg,) = [entry for entry in engine.client.api.history(tags["env-debian-probe-a"]) if "dpkg -i" in entry["CreatedBy"]]
    print(f"dpkg layer: {dpkg['Size'] / 1e6:.1f} MB")
    assert dpkg["Size"] > 10_000_000
