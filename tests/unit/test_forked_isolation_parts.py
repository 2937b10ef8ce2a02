"""The pure parts of forked Episode isolation: the lane container's spec and outer profile, the inner filter's lists,
the zygote's reading of exits and OOM kills, the sandbox root's layout, and its refusal to fork with threads."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from epg_sdk.runtime import inner_filter, namespaces, zygote
from orchestrator.backends.container_spec import ContainerSpec, to_docker_kwargs
from orchestrator.backends.settings import SandboxLimits
from orchestrator.backends.zygote import LANE_SPARE_PIDS, ZYGOTE_MEMORY_BYTES, lane_profile, lane_spec

# What the lane's profile adds to Docker's default allow-list, and nothing more.
ADDED_FOR_NAMESPACES = {"clone", "mount", "umount2", "pivot_root"}


def _allowed(profile: dict) -> dict[str, list[dict]]:
    allowed: dict[str, list[dict]] = {}
    for rule in profile["syscalls"]:
        if rule["action"] == "SCMP_ACT_ALLOW":
            for name in rule["names"]:
                allowed.setdefault(name, []).append(rule)
    return allowed


def test_lane_profile_is_docker_s_default_plus_namespace_creation_only():
    profile = json.loads(lane_profile())
    assert profile["defaultAction"] == "SCMP_ACT_ERRNO"
    allowed = _allowed(profile)
    additions = {name for name, rules in allowed.items() if any("forked isolation" in rule.get("comment", "") for rule in rules)}
    assert additions == ADDED_FOR_NAMESPACES
    for never in ("unshare", "setns", "chroot", "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key",
                  "io_uring_setup", "kexec_load", "init_module", "open_by_handle_at", "process_vm_readv", "kcmp"):
        assert never not in allowed, never
    (clone3,) = [rule for rule in profile["syscalls"] if "clone3" in rule["names"]]
    assert clone3["action"] == "SCMP_ACT_ERRNO" and clone3["errnoRet"] == 38  # ENOSYS: libc falls back to clone
    unconditional = [name for rule in profile["syscalls"] if rule["action"] == "SCMP_ACT_ALLOW" and not rule.get("args")
                     for name in rule["names"]]
    assert len(unconditional) == len(set(unconditional))


def test_lane_spec_is_a_hardened_container_with_the_lane_profile(tmp_path: Path):
    limits = SandboxLimits(memory_bytes=256 << 20, pids=40)
    spec = lane_spec(image="epg/policy-runtime:x", labels={"org.evopolicygym.managed": "true"}, name="epg-lane-t-0",
                     exchange=tmp_path / "lane0", programs=tmp_path / "programs", control=tmp_path / "control0",
                     limits=limits, cpu="1", tail_bytes=8192)
    kwargs = to_docker_kwargs(spec)
    assert kwargs["user"] == "10001:10001" and kwargs["cap_drop"] == ["ALL"] and kwargs["read_only"] is True
    assert kwargs["network_mode"] == "none"
    assert kwargs["security_opt"] == ["no-new-privileges", f"seccomp={lane_profile()}"]
    assert kwargs["mem_limit"] == kwargs["memswap_limit"] == (256 << 20) + ZYGOTE_MEMORY_BYTES
    assert kwargs["pids_limit"] == 40 + LANE_SPARE_PIDS
    assert kwargs["cpuset_cpus"] == "1"
    mounts = {mount["Target"]: mount["ReadOnly"] for mount in kwargs["mounts"]}
    assert mounts == {"/exchange": True, "/programs": True, "/control": False}
    assert kwargs["command"][:3] == ["python3", "-m", "epg_sdk.runtime.zygote"]


def test_a_container_spec_keeps_the_engine_s_default_profile_unless_given_one():
    spec = ContainerSpec(image="i", command=("true",), labels={})
    assert to_docker_kwargs(spec)["security_opt"] == ["no-new-privileges"]


def test_inner_filter_denies_every_namespace_flag_of_clone():
    assert sorted(inner_filter.CLONE_NAMESPACE_FLAGS) == sorted(
        [0x80, namespaces.CLONE_NEWNS, 0x02000000, namespaces.CLONE_NEWUTS, namespaces.CLONE_NEWIPC,
         namespaces.CLONE_NEWUSER, namespaces.CLONE_NEWPID, namespaces.CLONE_NEWNET])
    for name in ("unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "ptrace", "process_vm_readv",
                 "process_vm_writev", "kcmp", "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "keyctl"):
        assert name in inner_filter.DENIED, name
    assert inner_filter.NOT_IMPLEMENTED == ("clone3",)


def test_exit_codes_read_as_the_engine_reports_a_container_s():
    assert zygote.exit_code_of(3 << 8) == 3
    assert zygote.exit_code_of(0) == 0
    assert zygote.exit_code_of(signal.SIGKILL) == 137
    assert zygote.exit_code_of(signal.SIGABRT) == 128 + signal.SIGABRT


def test_oom_kills_are_read_from_cgroup_v1_or_v2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    v1, v2 = tmp_path / "oom_control", tmp_path / "memory.events"
    monkeypatch.setattr(zygote, "CGROUP_V1_OOM", str(v1))
    monkeypatch.setattr(zygote, "CGROUP_V2_EVENTS", str(v2))
    assert zygote.oom_kills() == -1
    v2.write_text("low 0\nhigh 0\nmax 4\noom 2\noom_kill 2\noom_group_kill 0\n")
    assert zygote.oom_kills() == 2
    v1.write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 5\n")
    assert zygote.oom_kills() == 5


def test_sandbox_root_binds_usr_etc_and_only_what_lies_outside_them(tmp_path: Path):
    binds, links = namespaces.root_layout(["", "/", "/usr/lib/python3/dist-packages", str(tmp_path), str(tmp_path / "sub"),
                                           "/does/not/exist"])
    assert binds[:2] == ("/usr", "/etc")
    assert str(tmp_path) in binds
    assert not any(bind.startswith("/usr/") or bind.startswith(str(tmp_path) + "/") for bind in binds)
    assert "/does/not/exist" not in binds and "/" not in binds
    for path, target in links:
        assert os.path.islink(path) and os.readlink(path) == target


def test_the_zygote_refuses_to_fork_with_a_second_thread(monkeypatch: pytest.MonkeyPatch):
    prepared = object.__new__(zygote.Zygote)
    prepared._children = {}
    monkeypatch.setattr(zygote, "thread_count", lambda: 2)
    with pytest.raises(zygote.ZygoteRefused, match="2 threads"):
        prepared.spawn("ep000001-abcdef", 60)


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "../lane1"])
def test_the_zygote_refuses_a_slot_name_that_is_not_a_plain_name(name: str):
    prepared = object.__new__(zygote.Zygote)
    prepared._children = {}
    with pytest.raises(ValueError):
        prepared.spawn(name, 60)
