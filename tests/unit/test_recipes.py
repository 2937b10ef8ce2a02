"""Image recipes: what each image holds and the hash of its build inputs."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.images.catalogue import REPO_ROOT, discover, resolve_benchmark
from orchestrator.images.recipes import (
    POLICY_FILES,
    RUNNER_FILES,
    ImageRecipe,
    _merge_requirements,
    environment_recipe,
    policy_runtime_recipe,
)


@pytest.fixture
def recipe_files(tmp_path):
    (tmp_path / "a.py").write_bytes(b"A = 1\n")
    (tmp_path / "b.py").write_bytes(b"B = 2\n")
    return tmp_path


def recipe(root: Path, **overrides) -> ImageRecipe:
    fields = dict(
        name="thing",
        dockerfile="FROM base\n",
        requirements=("numpy==2.4.6", "protobuf==7.36.2"),
        files={"pkg/a.py": root / "a.py", "pkg/b.py": root / "b.py"},
        labels={"k": "v"},
    )
    fields.update(overrides)
    return ImageRecipe(**fields)


def test_inputs_hash_is_stable_for_equal_inputs(recipe_files, tmp_path):
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in ("a.py", "b.py"):
        (copy / name).write_bytes((recipe_files / name).read_bytes())
    first = recipe(recipe_files).inputs_hash("sha256:base")
    assert first == recipe(recipe_files).inputs_hash("sha256:base")
    assert first == recipe(copy).inputs_hash("sha256:base")
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
        {"dockerfile": "FROM base\nRUN true\n"},
        {"labels": {"k": "w"}},
        {"requirements": ("numpy==2.4.6",)},
    ],
    ids=lambda o: next(iter(o)),
)
def test_inputs_hash_changes_with_every_other_input(recipe_files, override):
    assert recipe(recipe_files, **override).inputs_hash("base") != recipe(recipe_files).inputs_hash("base")


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
    assert not any(path.startswith("orchestrator/sdk/") for path in policy.files)
    assert not any(Path(path).name in {"runner.py", "episode_loop.py"} for path in policy.files)
    assert not any(path.startswith(("orchestrator/kernel/", "orchestrator/backends/")) for path in policy.files)
    assert "orchestrator/runtimes/policy_runtime.py" in policy.files


def test_policy_runtime_files_come_from_the_repository():
    policy = policy_runtime_recipe()
    assert set(policy.files) == set(POLICY_FILES)
    assert all(source == REPO_ROOT / destination for destination, source in policy.files.items())


@pytest.fixture(scope="module")
def cartpole():
    package, _benchmark_id, _entry = resolve_benchmark("CartPole-v1", discover())
    return package, environment_recipe(package)


def test_environment_recipe_pins_gymnasium(cartpole):
    _package, image = cartpole
    assert "gymnasium==1.4.0" in image.requirements
    assert all("==" in requirement for requirement in image.requirements)


def test_environment_recipe_requirements_are_sorted_and_unique(cartpole):
    _package, image = cartpole
    names = [r.split("==")[0].lower() for r in image.requirements]
    assert names == sorted(set(names))


def test_environment_recipe_holds_the_runner_and_the_package(cartpole):
    package, image = cartpole
    assert set(RUNNER_FILES) <= set(image.files)
    assert "orchestrator/runtimes/runner.py" in image.files
    assert f"{package.table.module}/__init__.py" in image.files
    assert image.files[f"{package.table.module}/README.md"] == package.root / "README.md"
    assert image.name == package.image == "env-cartpole"
    assert image.labels == {"org.evopolicygym.benchmarks": "CartPole-v1"}


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
