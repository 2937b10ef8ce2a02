"""EvoPolicyGym packages in the catalogue (their layout, their uv.lock, their images on Python 3.13) and the choice of
Python per package."""

from __future__ import annotations

import os
import subprocess
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from orchestrator.images.base import bootstrap_tag, choice_for
from orchestrator.images.builder import platform_tags
from orchestrator.images.catalogue import (
    MESA_EGL,
    CatalogueError,
    discover,
    discovered_label,
    find_package_dirs,
    label_benchmarks,
    load_package,
    parse_discovered,
    resolve_benchmark,
    with_discovered,
)
from orchestrator.images.pins import sdk_layer_versions
from orchestrator.images.recipes import environment_recipe, policy_image_of, policy_runtime_recipe, sdk_layer_recipe
from orchestrator.images.uvlock import UvLockError, locked_requirements
from orchestrator.kernel.infrastructure import InfrastructureError

NUMPY = sdk_layer_versions()["numpy"]


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def evopolicygym_package(root: Path, name: str = "cartpole", module: str = "cartpole", dependencies: str = '"gymnasium>=1.2.2,<2"',
                         lock: str | None = None) -> Path:
    """A package laid out as EvoPolicyGym's repository lays them out: src/MODULE, programs/baseline, hatch, uv.lock."""
    _write(root / "pyproject.toml", f'''\
        [project]
        name = "evopolicygym-benchmark-{name}"
        version = "0.1.0"
        requires-python = ">=3.12,<3.13"
        dependencies = ["evopolicygym==0.3.*", {dependencies}]

        [project.optional-dependencies]
        dev = ["mypy==2.3.0"]

        [tool.uv.sources]
        evopolicygym = {{ path = "../../../..", editable = true }}

        [tool.hatch.build.targets.wheel]
        packages = ["src/{module}"]
        ''')
    _write(root / "src" / module / "__init__.py", "type Observation = list[float]\n")
    _write(root / "src" / module / "programs" / "baseline" / "policy.py", "def make_policy(context):\n    return None\n")
    _write(root / "src" / module / "programs" / "greedy" / "policy.py", "def make_policy(context):\n    return None\n")
    if lock is not None:
        _write(root / "uv.lock", lock)
    return root


CARTPOLE_LOCK = '''\
    version = 1
    revision = 3
    requires-python = "==3.12.*"

    [[package]]
    name = "evopolicygym"
    version = "0.3.0"
    source = { editable = "../../../.." }
    dependencies = [{ name = "kernel-only" }]

    [[package]]
    name = "kernel-only"
    version = "1.0"
    source = { registry = "https://pypi.org/simple" }

    [[package]]
    name = "evopolicygym-benchmark-cartpole"
    version = "0.1.0"
    source = { editable = "." }
    dependencies = [
        { name = "evopolicygym" },
        { name = "gymnasium", extra = ["mujoco"] },
    ]

    [package.optional-dependencies]
    dev = [{ name = "mypy" }]

    [[package]]
    name = "mypy"
    version = "2.3.0"
    source = { registry = "https://pypi.org/simple" }

    [[package]]
    name = "gymnasium"
    version = "1.3.0"
    source = { registry = "https://pypi.org/simple" }
    dependencies = [
        { name = "numpy" },
        { name = "Farama_Notifications" },
        { name = "colorama", marker = "sys_platform == 'win32'" },
        { name = "typing-extensions", marker = "python_full_version < '3.13'" },
    ]

    [package.optional-dependencies]
    mujoco = [{ name = "mujoco" }]

    [[package]]
    name = "numpy"
    version = "2.3.0"
    source = { registry = "https://pypi.org/simple" }

    [[package]]
    name = "farama-notifications"
    version = "0.0.6"
    source = { registry = "https://pypi.org/simple" }

    [[package]]
    name = "colorama"
    version = "0.4.6"
    source = { registry = "https://pypi.org/simple" }

    [[package]]
    name = "typing-extensions"
    version = "4.15.0"
    source = { registry = "https://pypi.org/simple" }

    [[package]]
    name = "mujoco"
    version = "3.10.0"
    source = { registry = "https://pypi.org/simple" }
    '''


def test_the_uv_lock_pins_the_locked_closure_for_python_313_on_linux_without_the_kernel_or_dev_extras():
    locked = locked_requirements(textwrap.dedent(CARTPOLE_LOCK), "evopolicygym-benchmark-cartpole", skip=["evopolicygym"])
    # gymnasium's mujoco extra is followed; colorama (Windows) and typing-extensions (before 3.13) are not for this
    # target; the kernel and what only it needs, and the package's own dev extra, are left out
    assert locked.pins == ("farama-notifications==0.0.6", "gymnasium==1.3.0", "mujoco==3.10.0", "numpy==2.3.0")
    assert locked.local == ()


def test_a_uv_lock_that_does_not_lock_the_package_or_a_dependency_is_refused():
    with pytest.raises(UvLockError, match="locks no package"):
        locked_requirements(textwrap.dedent(CARTPOLE_LOCK), "another")
    broken = textwrap.dedent(CARTPOLE_LOCK).replace('name = "mujoco"\n', 'name = "mujoco-elsewhere"\n')
    with pytest.raises(UvLockError, match="mujoco"):
        locked_requirements(broken, "evopolicygym-benchmark-cartpole", skip=["evopolicygym"])
    with pytest.raises(UvLockError, match="not TOML"):
        locked_requirements("[[package]\n", "x")


def test_a_package_depending_on_evopolicygym_without_a_tool_epg_table_is_read_as_an_evopolicygym_package(tmp_path):
    root = evopolicygym_package(tmp_path / "cartpole", lock=CARTPOLE_LOCK)
    package = load_package(root)
    assert package.image == "env-epg-cartpole"
    assert (package.table.module, package.python, package.table.benchmarks) == ("cartpole", "3.13", {})
    assert package.baseline_dir == root / "src" / "cartpole" / "programs" / "baseline"
    assert package.module_dir == root / "src" / "cartpole"
    assert package.evopolicygym is not None
    assert package.evopolicygym.locked
    assert package.evopolicygym.programs == ("baseline", "greedy")
    assert "evopolicygym" not in " ".join(package.evopolicygym.requirements)
    assert package.evopolicygym.requirements == ("farama-notifications==0.0.6", "gymnasium==1.3.0", "mujoco==3.10.0", "numpy==2.3.0")


def test_a_benchmark_gets_the_packaged_baseline_named_after_its_profile_and_the_others_the_baseline(tmp_path):
    root = evopolicygym_package(tmp_path / "crafter", name="crafter", module="crafter_benchmarks", lock=None)
    for name in ("local_symbolic_baseline", "local_baseline"):
        _write(root / "src" / "crafter_benchmarks" / "programs" / name / "policy.py", "def make_policy(context):\n    return None\n")
    package = load_package(root)
    programs = root / "src" / "crafter_benchmarks" / "programs"
    assert package.baseline_for("crafter/CrafterReward-v1/local-symbolic-v1/achievement-score-v1") == programs / "local_symbolic_baseline"
    assert package.baseline_for("crafter/CrafterReward-v1/achievement-score-v1") == programs / "baseline" == package.baseline_dir
    assert package.baseline_for("crafter/local-v2") == programs / "local_baseline"


def test_without_a_uv_lock_an_evopolicygym_package_requires_its_pyproject_ranges(tmp_path):
    package = load_package(evopolicygym_package(tmp_path / "p", dependencies='"gymnasium>=1.2.2,<2", "pillow>=12"'))
    assert package.evopolicygym is not None and not package.evopolicygym.locked
    assert package.evopolicygym.requirements == ("gymnasium>=1.2.2,<2", "pillow>=12")


def test_an_evopolicygym_package_without_one_src_module_is_refused_naming_the_field(tmp_path):
    root = evopolicygym_package(tmp_path / "p")
    pyproject = root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('packages = ["src/cartpole"]', 'packages = ["cartpole", "other"]'))
    with pytest.raises(CatalogueError, match="tool.hatch.build.targets.wheel.packages"):
        load_package(root)


def test_the_families_that_render_with_mujoco_get_mesas_egl_packages(tmp_path):
    robotics = load_package(evopolicygym_package(tmp_path / "r", "gymnasium-robotics", "robotics_benchmarks",
                                                 '"gymnasium-robotics==1.4.2", "mujoco>=3.10.0,<3.11"'))
    cheetah = load_package(evopolicygym_package(tmp_path / "h", "half-cheetah", "half_cheetah",
                                                '"gymnasium[mujoco]>=1.3.0,<2", "imageio-ffmpeg>=0.6,<0.7"'))
    hopper = load_package(evopolicygym_package(tmp_path / "o", "hopper", "hopper", '"gymnasium[mujoco]>=1.3.0,<2"'))
    assert robotics.table.debian == cheetah.table.debian == tuple(sorted(MESA_EGL))
    assert hopper.table.debian == ()


def test_a_checkout_of_evopolicygym_finds_its_nested_packages_and_not_the_kernel_or_a_vendored_distribution(tmp_path):
    _write(tmp_path / "pyproject.toml", '[project]\nname = "evopolicygym"\ndependencies = []\n')
    evopolicygym_package(tmp_path / "environments" / "gymnasium" / "classic_control" / "cartpole")
    doorkey = evopolicygym_package(tmp_path / "environments" / "minigrid" / "minigrid" / "doorkey", "minigrid-doorkey", "minigrid_doorkey")
    _write(doorkey / "vendor" / "lib" / "pyproject.toml", '[project]\nname = "lib"\ndependencies = ["numpy"]\n')
    _write(tmp_path / "environments" / "atcoder" / "notes" / "pyproject.toml", '[project]\nname = "notes"\ndependencies = []\n')
    found = find_package_dirs(tmp_path)
    assert [path.relative_to(tmp_path).as_posix() for path in found] == [
        "environments/gymnasium/classic_control/cartpole", "environments/minigrid/minigrid/doorkey"]
    packages = discover([tmp_path], installed=False)
    assert [package.image for package in packages] == ["env-epg-cartpole", "env-epg-minigrid-doorkey"]  # none dropped as a duplicate


@pytest.mark.skipif(not os.environ.get("EPG_EVOPOLICYGYM_CHECKOUT"), reason="EPG_EVOPOLICYGYM_CHECKOUT names no checkout of EvoPolicyGym")
def test_a_real_checkout_of_evopolicygym_holds_63_packages():
    packages = discover([Path(os.environ["EPG_EVOPOLICYGYM_CHECKOUT"])], installed=False)
    assert len(packages) == 63
    assert len({package.image for package in packages}) == 63
    assert all(package.evopolicygym is not None and package.evopolicygym.locked for package in packages)
    assert all(package.baseline_dir.joinpath("policy.py").is_file() for package in packages)


def test_a_benchmark_of_an_evopolicygym_package_resolves_once_its_image_label_names_it(tmp_path):
    package = load_package(evopolicygym_package(tmp_path / "highway", "highway-env", "highway_benchmarks"))
    with pytest.raises(CatalogueError, match="unknown benchmark.*images build env-epg-highway-env"):
        resolve_benchmark("highway-parking", [package])
    label = discovered_label(parse_discovered(
        'noise\n[{"id": "highway-parking", "entry": "highway_benchmarks:HighwayBenchmark?profile=parking", '
        '"class": "HighwayBenchmark", "profile": "parking"}, {"id": "highway-v0", "entry": "highway_benchmarks:HighwayBenchmark", '
        '"class": "HighwayBenchmark", "profile": null}]'))
    built = with_discovered(package, label_benchmarks(label))
    assert resolve_benchmark("Highway-Parking", [built])[1:] == ("highway-parking", "highway_benchmarks:HighwayBenchmark?profile=parking")
    assert resolve_benchmark("highway", [built])[1:] == ("highway-v0", "highway_benchmarks:HighwayBenchmark")


def test_the_benchmarks_label_reads_as_ids_for_our_images_and_as_entries_for_discovered_ones():
    assert label_benchmarks("CartPole-v1,Acrobot-v1") == {"CartPole-v1": "", "Acrobot-v1": ""}
    assert label_benchmarks('[{"id":"a","entry":"m:A","class":"A","profile":null}]') == {"a": "m:A"}
    assert label_benchmarks("[not json") == {}
    with pytest.raises(CatalogueError, match="twice"):
        parse_discovered('[{"id":"a","entry":"m:A"},{"id":"a","entry":"m:B"}]')
    with pytest.raises(CatalogueError, match="no JSON list"):
        parse_discovered("Traceback (most recent call last):")


def test_an_evopolicygym_image_builds_on_the_py313_layer_discovers_its_benchmarks_and_keeps_the_runners_numpy(tmp_path):
    package = load_package(evopolicygym_package(tmp_path / "cartpole", lock=CARTPOLE_LOCK))
    recipe = environment_recipe(package)
    assert (recipe.parent, recipe.python) == ("env-sdk-py313", "3.13")
    assert recipe.discover == ("python3", "-m", "epg_sdk.evopolicygym", "discover", "cartpole")
    assert {"cartpole/__init__.py", "cartpole/programs/baseline/policy.py"} <= set(recipe.files)
    # numpy 2.3.0 from the lock gives way to the layer's (the runner imports it); gymnasium 1.3.0 is installed over it
    assert "numpy==2.3.0" not in recipe.requirements and f"numpy=={NUMPY}" not in recipe.requirements
    assert "gymnasium==1.3.0" in recipe.requirements and "mujoco==3.10.0" in recipe.requirements
    assert "evopolicygym.authoring" in recipe.build_args["SMOKE"] and "cartpole" in recipe.build_args["SMOKE"]
    assert policy_image_of(package) == "policy-runtime-py313"


def test_one_of_our_packages_asks_for_python_313_and_gets_the_py313_layer_and_policy_runtime(tmp_path):
    root = _write(tmp_path / "ours" / "pyproject.toml", '''\
        [project]
        name = "epg-env-ours"

        [project.entry-points."epg.benchmarks"]
        "Ours-v0" = "epg_env_ours:make_benchmark"

        [tool.epg]
        image = "env-ours"
        module = "epg_env_ours"
        python = "3.13"
        ''').parent
    _write(root / "epg_env_ours" / "__init__.py", "")
    package = load_package(root)
    recipe = environment_recipe(package)
    assert (package.python, recipe.parent, recipe.python, policy_image_of(package)) == ("3.13", "env-sdk-py313", "3.13", "policy-runtime-py313")
    default = load_package(_write(tmp_path / "d" / "pyproject.toml",
                                  (root / "pyproject.toml").read_text().replace('python = "3.13"\n', "")).parent)
    assert (default.python, environment_recipe(default).parent, policy_image_of(default)) == ("3.11", "env-sdk", "policy-runtime")
    root.joinpath("pyproject.toml").write_text((root / "pyproject.toml").read_text().replace('"3.13"', '"3.12"'))
    with pytest.raises(CatalogueError, match="tool.epg.python"):
        load_package(root)


def test_the_py313_layer_and_policy_runtime_carry_the_compat_package_and_keep_their_311_tags_apart(tmp_path):
    layer, policy = sdk_layer_recipe("3.13"), policy_runtime_recipe("3.13")
    assert (layer.name, policy.name) == ("env-sdk-py313", "policy-runtime-py313")
    assert layer.distributions[-1].name == policy.distributions[-1].name == "compat"
    assert "evopolicygym.policy" in policy.build_args["SMOKE"]
    assert policy_runtime_recipe().distributions == () and "evopolicygym" not in policy_runtime_recipe().build_args["SMOKE"]
    assert policy.inputs_hash("same-base") != policy_runtime_recipe().inputs_hash("same-base")


def test_the_base_of_each_python_is_chosen_from_one_base_option():
    assert choice_for("auto", "3.11") == choice_for("auto", "3.13") == "auto"
    assert choice_for("debootstrap", "3.13") == "debootstrap"
    assert (choice_for("my/py311", "3.11"), choice_for("my/py311", "3.13")) == ("my/py311", "")  # none asked for
    assert (choice_for("my/py311,3.13=my/py313", "3.11"), choice_for("my/py311,3.13=my/py313", "3.13")) == ("my/py311", "my/py313")
    assert choice_for("3.13=debootstrap", "3.11") == "auto"
    with pytest.raises(ValueError, match="3.12"):
        choice_for("3.12=x", "3.11")
    assert bootstrap_tag(python="3.13").startswith("epg/base:trixie-") and bootstrap_tag(python="3.13") != bootstrap_tag()


def test_wheels_for_python_313_may_need_trixies_newer_glibc():
    assert "manylinux_2_41_x86_64" in platform_tags("x86_64", python="3.13")
    assert not any(tag.startswith(("manylinux_2_41", "manylinux_2_38")) for tag in platform_tags("x86_64"))
    assert "manylinux_2_36_x86_64" in platform_tags("x86_64", python="3.13")


def test_benchmarks_lists_an_evopolicygym_package_as_not_built_until_its_image_exists(tmp_path, monkeypatch):
    from tests.support.cli import invoke_cli

    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")  # no engine: no image is built
    evopolicygym_package(tmp_path / "environments" / "gymnasium" / "classic_control" / "cartpole", lock=CARTPOLE_LOCK)
    result = invoke_cli("benchmarks", "--json", "--environments", str(tmp_path))
    assert result.exit_code == 0, result.stderr
    document = result.json()
    assert [row["image"] for row in document["not_built"]] == ["env-epg-cartpole"]
    assert document["not_built"][0]["python"] == "3.13"
    assert "env-epg-cartpole" not in {row["image"] for row in document["benchmarks"]}
    table = invoke_cli("benchmarks", "--environments", str(tmp_path))
    assert "(not built)" in table.stdout and "env-epg-cartpole" in table.stdout


def test_env_test_takes_the_entries_of_an_evopolicygym_image_from_its_label():
    from orchestrator.backends.labels import BENCHMARKS
    from orchestrator.envcheck import held_benchmarks

    label = '[{"id":"highway-parking","entry":"highway_benchmarks:HighwayBenchmark?profile=parking","class":"HighwayBenchmark","profile":"parking"}]'
    assert held_benchmarks({BENCHMARKS: label}, {}, {}) == {"highway-parking": "highway_benchmarks:HighwayBenchmark?profile=parking"}
    assert held_benchmarks({BENCHMARKS: "CartPole-v1"}, {}, {"CartPole-v1": "m:f"}) == {"CartPole-v1": "m:f"}


def test_a_family_that_renders_with_mujoco_gets_egl_in_its_image_environment_and_tag(tmp_path):
    robotics = load_package(evopolicygym_package(tmp_path / "r", "gymnasium-robotics", "robotics_benchmarks",
                                                 '"gymnasium-robotics==1.4.2", "mujoco>=3.10.0,<3.11"'))
    recipe = environment_recipe(robotics)
    assert recipe.environment == {"MUJOCO_GL": "egl", "PYOPENGL_PLATFORM": "egl"}
    assert recipe.debian == tuple(sorted(MESA_EGL))
    assert environment_recipe(load_package(evopolicygym_package(tmp_path / "c"))).environment == {}
    assert replace(recipe, environment={}).inputs_hash("base") != recipe.inputs_hash("base")


def test_the_debian_packages_of_a_python_313_image_come_from_trixies_lists_in_the_cache(tmp_path, monkeypatch):
    from orchestrator.images import debian
    from orchestrator.images.builder import ImageBuilder
    from orchestrator.images.debian import DebianPackage, HostApt, SuiteApt, download

    builder = ImageBuilder(client=None, cache_dir=tmp_path / "cache")  # type: ignore[arg-type]  # no engine is asked
    apt = builder._apt_of("3.13")
    assert isinstance(apt, SuiteApt) and isinstance(builder._apt_of("3.11"), HostApt) and not isinstance(builder._apt_of("3.11"), SuiteApt)
    options = " ".join(apt.options)
    root = tmp_path / "cache" / "apt" / "trixie"
    assert f"Dir::Etc::SourceList={root / 'sources.list'}" in options and f"Dir::State::status={root / 'status'}" in options
    calls = []

    def run(arguments, **kwargs):
        calls.append(arguments)
        if "update" in arguments:
            (root / "state" / "lists" / "deb.debian.org_debian_dists_trixie_main_binary-amd64_Packages").write_text("")
        if "download" in arguments:
            (Path(kwargs["cwd"]) / "libegl1_1.7.0-1_amd64.deb").write_bytes(b"deb")
        return subprocess.CompletedProcess(arguments, 0, "", "")

    monkeypatch.setattr(debian.subprocess, "run", run)
    assert apt.fingerprint().startswith("deb.debian.org_debian_dists_trixie")
    assert (root / "sources.list").read_text() == "deb http://deb.debian.org/debian trixie main\n"
    download((DebianPackage(name="libegl1", version="1.7.0-1", architecture="amd64"),), tmp_path / "debs", tmp_path / "out", apt.options)
    assert calls[0][1:] == [*apt.options, "update", "-q"] and calls[-1][1:-2] == [*apt.options, "download"]
    assert (tmp_path / "out" / "libegl1_1.7.0-1_amd64.deb").is_file()


def test_a_base_option_naming_a_python_without_images_is_refused_before_anything_starts():
    from tests.support.cli import invoke_cli

    result = invoke_cli("images", "list", "--base", "3.12=my/base")
    assert result.exit_code == 2
    assert "no base image for Python 3.12" in " ".join(result.stderr.replace("│", " ").split())


def test_a_distribution_the_package_vendors_is_built_from_its_directory_and_one_outside_is_refused(tmp_path):
    lock = CARTPOLE_LOCK.replace('''        {{ name = "gymnasium", extra = ["mujoco"] }},'''.replace("{{", "{").replace("}}", "}"),
                                 '''        { name = "gymnasium", extra = ["mujoco"] },
        { name = "jackdaw" },''') + '''
    [[package]]
    name = "jackdaw"
    version = "0.1.0"
    source = { directory = "vendor/jackdaw" }
    dependencies = [{ name = "numpy" }]
    '''
    root = evopolicygym_package(tmp_path / "balatro", "cartpole", "balatro", lock=lock)
    _write(root / "vendor" / "jackdaw" / "pyproject.toml", '[project]\nname = "jackdaw"\nversion = "0.1.0"\n')
    package = load_package(root)
    assert package.evopolicygym is not None and package.evopolicygym.local == ("vendor/jackdaw",)
    assert "jackdaw==0.1.0" not in package.evopolicygym.requirements
    assert environment_recipe(package).distributions == (root / "vendor" / "jackdaw",)
    (root / "uv.lock").write_text((root / "uv.lock").read_text().replace('directory = "vendor/jackdaw"', 'directory = "../../elsewhere"'))
    with pytest.raises(CatalogueError, match="no distribution inside the package"):
        load_package(root)


def test_push_and_pull_carry_the_bootstrapped_base_of_each_python_the_images_use(tmp_path):
    from docker.errors import ImageNotFound

    from orchestrator.images.builder import ImageBuilder

    class NoImages:  # an engine holding no python:3.X-slim: each Python's base is a bootstrapped one
        class images:  # noqa: N801  (docker-py's attribute name)
            @staticmethod
            def get(reference):
                raise ImageNotFound(reference)

    builder = ImageBuilder(NoImages(), cache_dir=tmp_path)  # type: ignore[arg-type]
    assert builder.base_tags(["policy-runtime"]) == [("base", bootstrap_tag())]
    assert builder.base_tags(["policy-runtime-py313", "env-sdk"]) == [("base", bootstrap_tag()), ("base-py313", bootstrap_tag(python="3.13"))]
    assert builder.base_tags(["env-sdk-py313"]) == [("base-py313", bootstrap_tag(python="3.13"))]
    assert ImageBuilder(NoImages(), base="3.13=my/base", cache_dir=tmp_path).base_tags(["env-sdk-py313"]) == []  # type: ignore[arg-type]
    assert ImageBuilder(NoImages(), base="my/base", cache_dir=tmp_path).base_tags(["env-sdk-py313"]) == []  # type: ignore[arg-type]
    everything = {r.name for r in ImageBuilder(NoImages(), cache_dir=tmp_path)._select(None)}  # type: ignore[arg-type]
    on_my_base = {r.name for r in ImageBuilder(NoImages(), base="my/base", cache_dir=tmp_path)._select(None)}  # type: ignore[arg-type]
    assert {"policy-runtime-py313", "env-sdk-py313"} <= everything and everything - on_my_base == {"policy-runtime-py313", "env-sdk-py313"}
    with pytest.raises(InfrastructureError, match=r"names no base for the Python 3.13 images: add 3.13=IMAGE"):
        ImageBuilder(NoImages(), base="my/base", cache_dir=tmp_path).base_id("3.13")  # type: ignore[arg-type]


def test_a_sandbox_of_a_python_313_benchmark_opens_with_the_py313_policy_runtime(tmp_path):
    from types import SimpleNamespace

    from orchestrator.sandbox_opening import benchmark_images

    package = with_discovered(load_package(evopolicygym_package(tmp_path / "cartpole", lock=CARTPOLE_LOCK)),
                              {"gymnasium/CartPole-v1/mean-return-v1": "cartpole:CartPoleBenchmark"})
    asked: list[list[str]] = []

    class Builder:
        def packages(self):
            return [package]

        def ensure(self, names):
            asked.append(list(names))
            return [SimpleNamespace(name=name, tag=f"epg/{name}:t") for name in names]

        def policy_image_for(self, image):
            return "policy-runtime-py313" if image == "epg/env-epg-cartpole:t" else "policy-runtime"

    images = benchmark_images(Builder(), "gymnasium/cartpole-v1/mean-return")  # type: ignore[arg-type]
    assert (images.environment, images.policy_runtime, images.benchmark_entry) == (
        "epg/env-epg-cartpole:t", "epg/policy-runtime-py313:t", "cartpole:CartPoleBenchmark")
    assert asked == [["policy-runtime-py313", "env-epg-cartpole"]]
    given = benchmark_images(Builder(), "x", environment_image="epg/env-epg-cartpole:t", benchmark_entry="cartpole:B")  # type: ignore[arg-type]
    assert given.policy_runtime == "epg/policy-runtime-py313:t"


def test_an_image_given_as_it_is_gets_the_policy_runtime_of_its_recipes_python(tmp_path):
    from types import SimpleNamespace

    from docker.errors import ImageNotFound

    from orchestrator.backends.labels import IMAGE
    from orchestrator.images.builder import ImageBuilder

    labels = {"epg/env-epg-cartpole:t": {IMAGE: "env-epg-cartpole"}, "epg/env-cartpole:t": {IMAGE: "env-cartpole"}, "other": {}}

    class Images:
        @staticmethod
        def get(reference):
            if reference not in labels:
                raise ImageNotFound(reference)
            return SimpleNamespace(labels=labels[reference])

    evopolicygym_package(tmp_path / "envs" / "cartpole", lock=CARTPOLE_LOCK)
    builder = ImageBuilder(SimpleNamespace(images=Images()), environments=[tmp_path / "envs"], cache_dir=tmp_path / "c")  # type: ignore[arg-type]
    assert builder.policy_image_for("epg/env-epg-cartpole:t") == "policy-runtime-py313"
    assert builder.policy_image_for("other") == builder.policy_image_for("missing") == "policy-runtime"


def test_a_pin_its_lock_knows_only_as_an_sdist_is_built_on_the_host_not_downloaded(tmp_path):
    lock = CARTPOLE_LOCK.replace('''name = "mujoco"
    version = "3.10.0"
    source = {{ registry = "https://pypi.org/simple" }}'''.replace("{{", "{").replace("}}", "}"), '''name = "mujoco"
    version = "3.10.0"
    source = { registry = "https://pypi.org/simple" }
    sdist = { url = "https://example.invalid/mujoco-3.10.0.tar.gz" }''')
    lock = lock.replace('''name = "numpy"
    version = "2.3.0"
    source = { registry = "https://pypi.org/simple" }''', '''name = "numpy"
    version = "2.3.0"
    source = { registry = "https://pypi.org/simple" }
    sdist = { url = "https://example.invalid/numpy-2.3.0.tar.gz" }
    wheels = [{ url = "https://example.invalid/numpy-2.3.0-cp313-cp313-manylinux_2_28_x86_64.whl" }]''')
    assert locked_requirements(textwrap.dedent(lock), "evopolicygym-benchmark-cartpole", skip=["evopolicygym"]).sdist_only == ("mujoco==3.10.0",)
    recipe = environment_recipe(load_package(evopolicygym_package(tmp_path / "c", lock=lock)))
    assert recipe.source_builds == ("mujoco==3.10.0",) and "mujoco==3.10.0" in recipe.requirements


def test_every_image_of_the_default_python_comes_before_the_python_313_ones_and_a_missing_compat_is_named(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from orchestrator.images import recipes
    from orchestrator.images.builder import ImageBuilder

    evopolicygym_package(tmp_path / "envs" / "cartpole", lock=CARTPOLE_LOCK)
    builder = ImageBuilder(SimpleNamespace(), environments=[tmp_path / "envs"], cache_dir=tmp_path / "c")  # type: ignore[arg-type]
    pythons = [recipe.python for recipe in builder.recipes().values()]
    assert pythons == sorted(pythons) and "3.13" in pythons and list(builder.recipes())[-1] != "policy-runtime"
    monkeypatch.setattr(recipes, "COMPAT_DISTRIBUTION", tmp_path / "no-compat")
    with pytest.raises(InfrastructureError, match="no-compat holds no pyproject.toml"):
        builder._build_wheel(recipes.policy_runtime_recipe("3.13").distributions[0], tmp_path)
