"""Agent skills (`agent.skills`): the content-addressed store, its bounds, the spec option, the mounts, the task text,
the records and the links each coding-agent CLI finds them by."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from orchestrator.agents.cli_agent import SKILL_DIRS, link_skills
from orchestrator.backends.labels import LabelSet
from orchestrator.kernel.ports import BenchmarkInfo
from orchestrator.kernel.program import ProgramLimits
from orchestrator.kernel.session import Budget
from orchestrator.records.run_dir import RunDirectory
from orchestrator.run import agent_container
from orchestrator.run.instructions import render_instructions
from orchestrator.run.preflight import preflight
from orchestrator.run.skills import MOUNT_ROOT, SKILL_LIMITS, SkillError, read_skill, store_skills
from orchestrator.run.spec import RunSpec

SKILL_MD = "---\nname: tune-cartpole\ndescription: Improve a CartPole policy.\n---\n\n# Tune\n\nSubmit small batches first.\n"
AGENTS = [
    {"kind": "scripted", "steps": [{"program": "p", "episodes": "0"}]},
    {"kind": "hill-climb"},
    {"kind": "random"},
    {"kind": "command", "image": "agent-base", "argv": ["true"]},
    {"kind": "codex", "model": "m"},
    {"kind": "claude-code", "model": "m"},
    {"kind": "gemini", "model": "m"},
    {"kind": "qwen-code", "model": "m"},
]


def make_skill(root: Path, name: str = "tune-cartpole", extra: dict[str, bytes] | None = None) -> Path:
    directory = root / name
    (directory / "scripts").mkdir(parents=True)
    (directory / "SKILL.md").write_text(SKILL_MD)
    (directory / "scripts" / "summarize.py").write_text("print('summary')\n")
    for path, data in (extra or {}).items():
        (directory / path).parent.mkdir(parents=True, exist_ok=True)
        (directory / path).write_bytes(data)
    return directory


# the store ----------------------------------------------------------------------------------------------------------
def test_a_skill_is_stored_once_under_its_digest_with_its_files(tmp_path: Path):
    make_skill(tmp_path / "src")
    store = tmp_path / "run" / "skills"

    (first,) = store_skills(["tune-cartpole"], tmp_path / "src", store)
    (again,) = store_skills(["tune-cartpole"], tmp_path / "src", store)

    assert first == again
    assert (first.name, first.files) == ("tune-cartpole", 2)
    assert first.digest.startswith("sha256:") and len(first.digest) == 71
    stored = store / first.digest.removeprefix("sha256:")
    assert sorted(str(p.relative_to(stored)) for p in stored.rglob("*")) == ["SKILL.md", "scripts", "scripts/summarize.py"]
    assert (stored / "SKILL.md").read_text() == SKILL_MD
    assert stat.S_IMODE((stored / "SKILL.md").stat().st_mode) == 0o644
    assert [p.name for p in store.iterdir()] == [stored.name]  # no staging left


def test_the_digest_depends_on_the_files_only(tmp_path: Path):
    one = make_skill(tmp_path / "a")
    two = make_skill(tmp_path / "b")
    os.utime(two / "SKILL.md", (1, 1))
    (two / "__pycache__").mkdir()
    (two / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")

    assert read_skill(one)[0] == read_skill(two)[0]
    (two / "SKILL.md").write_text(SKILL_MD + "\nOne more line.\n")
    assert read_skill(one)[0] != read_skill(two)[0]


def test_a_symlink_in_a_skill_is_refused_and_never_followed(tmp_path: Path):
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret")
    skill = make_skill(tmp_path / "src")
    (skill / "notes.md").symlink_to(secret)

    with pytest.raises(SkillError, match="symbolic link"):
        store_skills(["tune-cartpole"], tmp_path / "src", tmp_path / "store")
    assert not (tmp_path / "store").exists()


def test_a_skill_directory_that_is_a_symlink_is_refused(tmp_path: Path):
    make_skill(tmp_path / "src")
    (tmp_path / "src" / "linked").symlink_to(tmp_path / "src" / "tune-cartpole")

    with pytest.raises(SkillError, match="symbolic link"):
        read_skill(tmp_path / "src" / "linked")


def test_a_file_over_the_per_file_bound_is_refused(tmp_path: Path):
    skill = make_skill(tmp_path / "src", extra={"frames.bin": b"\0" * (SKILL_LIMITS.max_file_bytes + 1)})

    with pytest.raises(SkillError, match="frames.bin"):
        read_skill(skill)


def test_a_skill_over_its_total_bound_or_too_deep_is_refused(tmp_path: Path):
    skill = make_skill(tmp_path / "src", extra={"a.bin": b"\0" * 600, "b.bin": b"\0" * 600})
    with pytest.raises(SkillError):
        read_skill(skill, ProgramLimits(max_total_bytes=1000))
    deep = make_skill(tmp_path / "deep", extra={"/".join(["d"] * 20) + "/f.md": b"x"})
    with pytest.raises(SkillError, match="deeper"):
        read_skill(deep)


def test_a_directory_without_skill_md_is_not_a_skill(tmp_path: Path):
    skill = make_skill(tmp_path / "src")
    (skill / "SKILL.md").unlink()

    with pytest.raises(SkillError, match="SKILL.md"):
        read_skill(skill)


def test_two_skills_of_one_name_are_refused(tmp_path: Path):
    make_skill(tmp_path / "a")
    make_skill(tmp_path / "b")

    with pytest.raises(SkillError, match="named"):
        store_skills(["a/tune-cartpole", "b/tune-cartpole"], tmp_path, tmp_path / "store")


# the spec and preflight -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("agent", AGENTS, ids=[a["kind"] for a in AGENTS])
def test_every_agent_kind_takes_skills(agent: dict):
    spec = RunSpec.model_validate({"benchmark": "cartpole-v1", "agent": {**agent, "skills": ["skills/tune-cartpole"]}})
    assert spec.agent.skills == ["skills/tune-cartpole"]
    assert RunSpec.model_validate({"benchmark": "cartpole-v1", "agent": agent}).agent.skills == []


def test_the_spec_refuses_two_skills_with_one_directory_name():
    with pytest.raises(ValueError, match="same directory name"):
        RunSpec.model_validate({"benchmark": "b", "agent": {"kind": "hill-climb", "skills": ["a/x", "b/x"]}})


def test_preflight_names_each_skill_that_cannot_be_stored(tmp_path: Path):
    make_skill(tmp_path)
    (tmp_path / "empty").mkdir()
    spec = RunSpec.model_validate({"benchmark": "b", "agent": {"kind": "hill-climb", "skills": ["tune-cartpole", "empty", "none"]}})

    problems = [p for p in preflight(spec, tmp_path, []) if p.startswith("agent.skills")]

    assert [p.split(":")[0] for p in problems] == ["agent.skills.1", "agent.skills.2"]


# the Run: records, mounts, task text, links ---------------------------------------------------------------------------
def test_a_runs_skills_are_recorded_at_its_start_and_a_resume_takes_the_record(tmp_path: Path):
    make_skill(tmp_path / "spec")
    records = RunDirectory(tmp_path / "run")
    records.create("benchmark: b\n")
    spec = RunSpec.model_validate({"benchmark": "b", "agent": {"kind": "hill-climb", "skills": ["tune-cartpole"]}})

    (skill,) = agent_container.prepare_skills(spec, tmp_path / "spec", records)
    (tmp_path / "spec" / "tune-cartpole" / "SKILL.md").write_text("changed on the Host after the start")
    (resumed,) = agent_container.prepare_skills(spec, tmp_path / "spec", records)

    assert resumed == skill
    recorded = records.read_manifest().skills
    assert recorded is not None and [(s.name, s.digest, s.files) for s in recorded] == [(skill.name, skill.digest, 2)]


def test_each_skill_is_mounted_read_only_at_its_name(tmp_path: Path):
    make_skill(tmp_path / "spec")
    records = RunDirectory(tmp_path / "run")
    records.create("benchmark: b\n")
    spec = RunSpec.model_validate({"benchmark": "b", "agent": {"kind": "claude-code", "model": "m", "skills": ["tune-cartpole"]}})
    skills = agent_container.prepare_skills(spec, tmp_path / "spec", records)

    container = agent_container.agent_spec(image="i", spec=spec, records=records, labels=LabelSet(sandbox="s", owner="o"),
                                           user="1:1", token="t", plan_dir=None, memory_bytes=1 << 30, skills=skills)

    (mount,) = [m for m in container.mounts if m.target.startswith(MOUNT_ROOT)]
    assert (mount.target, mount.read_only) == (f"{MOUNT_ROOT}/tune-cartpole", True)
    assert mount.source == str(records.root / "skills" / skills[0].digest.removeprefix("sha256:"))
    assert container.environment["EPG_SKILLS"] == MOUNT_ROOT
    plain = agent_container.agent_spec(image="i", spec=spec, records=records, labels=LabelSet(sandbox="s", owner="o"),
                                       user="1:1", token="t", plan_dir=None, memory_bytes=1 << 30)
    assert "EPG_SKILLS" not in plain.environment and not [m for m in plain.mounts if m.target.startswith(MOUNT_ROOT)]


BENCHMARK = BenchmarkInfo(id="fake/v0", description="d", observation_space={}, action_space={}, horizon=1,
                          primary_metric="mean_return", direction="maximize", parameters={}, failure_return=0.0, readme="")


def test_the_task_text_lists_each_skill_where_it_is_mounted_and_none_without():
    text = render_instructions(BENCHMARK, Budget(episodes=4, max_submissions=2, pool_size=8), skills=["tune-cartpole", "other"])

    assert text.startswith("# Agent skills")
    assert f"`{MOUNT_ROOT}/tune-cartpole/SKILL.md`" in text and f"`{MOUNT_ROOT}/other/SKILL.md`" in text
    assert "evopolicygym-session submit program --episodes" in text
    assert "Agent skills" not in render_instructions(BENCHMARK, Budget(episodes=4, max_submissions=2, pool_size=8))


@pytest.mark.parametrize("cli", sorted(SKILL_DIRS))
def test_each_cli_finds_the_mounted_skills_where_it_looks_for_skills(tmp_path: Path, cli: str):
    mounted = tmp_path / "epg-skills"
    make_skill(mounted)

    links = link_skills(cli, tmp_path / "home", mounted)

    assert [str(link.relative_to(tmp_path / "home")) for link in links] == [f"{d}/tune-cartpole" for d in SKILL_DIRS[cli]]
    for link in links:
        assert (link / "SKILL.md").read_text() == SKILL_MD
        assert os.readlink(link) == str(mounted / "tune-cartpole")
    assert link_skills(cli, tmp_path / "home2", None) == []


def test_spec_check_and_run_refuse_a_skill_with_a_link_in_one_line_before_anything_starts(tmp_path: Path):
    import yaml
    from support.cli import invoke_cli

    skill = make_skill(tmp_path)
    (skill / "notes.md").symlink_to("/etc/hostname")
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"benchmark": "CartPole-v1", "agent": {"kind": "hill-climb", "skills": ["tune-cartpole"]}}))

    checked = invoke_cli("spec", "check", str(spec))
    refused = invoke_cli("run", str(spec), "-o", str(tmp_path / "run"), env={"DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"})

    for result in (checked, refused):
        assert result.exit_code == 1
        assert "agent.skills.0: " in result.stderr and "notes.md is a symbolic link" in result.stderr
    assert not (tmp_path / "run").exists()
