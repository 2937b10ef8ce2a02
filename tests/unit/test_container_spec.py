"""The hardened container spec and its translation into docker-py arguments."""

from __future__ import annotations

from typing import get_args

import pytest

from orchestrator.backends.container_spec import RUNTIMES, BindMount, ContainerSpec, to_docker_kwargs
from orchestrator.backends.engine import DockerEngine
from orchestrator.backends.labels import MANAGED, LabelSet

LABELS = LabelSet(sandbox="s1", owner="host:1").for_role("policy")


def spec(**overrides) -> ContainerSpec:
    return ContainerSpec(image="epg/policy-runtime:abc", command=("python3", "-m", "x"), labels=dict(LABELS), **overrides)


def test_defaults_are_hardened():
    kwargs = to_docker_kwargs(spec())
    assert kwargs["network_mode"] == "none"
    assert kwargs["network_disabled"] is True
    assert kwargs["read_only"] is True
    assert kwargs["cap_drop"] == ["ALL"]
    assert kwargs["security_opt"] == ["no-new-privileges"]
    assert kwargs["init"] is True
    assert kwargs["ipc_mode"] == "private"
    assert kwargs["pids_limit"] == 64
    assert kwargs["user"] == "10001:10001"
    assert kwargs["nano_cpus"] == 1_000_000_000
    assert kwargs["mem_limit"] == 512 * 1024 * 1024
    assert kwargs["stdin_open"] is False
    assert kwargs["detach"] is True


def test_no_privileged_flags_or_host_namespaces_are_requested():
    kwargs = to_docker_kwargs(spec())
    assert not kwargs.get("privileged")
    assert "cap_add" not in kwargs
    assert "pid_mode" not in kwargs
    assert "devices" not in kwargs
    assert "volumes" not in kwargs


def test_memory_limit_equals_memory_plus_swap_limit_so_there_is_no_swap():
    kwargs = to_docker_kwargs(spec(memory_bytes=300 * 1024 * 1024))
    assert kwargs["mem_limit"] == kwargs["memswap_limit"] == 300 * 1024 * 1024


def test_limits_and_user_come_from_the_spec():
    kwargs = to_docker_kwargs(spec(nano_cpus=250_000_000, pids_limit=16, user="123:456", working_dir="/work"))
    assert (kwargs["nano_cpus"], kwargs["pids_limit"], kwargs["user"], kwargs["working_dir"]) == (250_000_000, 16, "123:456", "/work")


def test_tmp_is_a_small_noexec_tmpfs_by_default():
    tmpfs = to_docker_kwargs(spec())["tmpfs"]
    assert set(tmpfs) == {"/tmp"}
    options = tmpfs["/tmp"].split(",")
    assert {"nosuid", "nodev", "noexec"} <= set(options)
    assert any(option.startswith("size=") for option in options)


def test_log_config_is_a_bounded_json_file():
    log_config = to_docker_kwargs(spec(log_max_bytes=4096))["log_config"]
    assert log_config["Type"] == "json-file"
    assert log_config["Config"]["max-size"] == "4096"
    assert log_config["Config"]["max-file"] == "1"


def test_network_is_left_to_the_engine_only_when_explicitly_enabled():
    kwargs = to_docker_kwargs(spec(network_none=False))
    assert "network_mode" not in kwargs
    assert "network_disabled" not in kwargs


def test_bind_mounts_are_translated_with_their_read_only_flag():
    mounts = to_docker_kwargs(
        spec(mounts=(BindMount(source="/host/program", target="/program"), BindMount(source="/host/sock", target="/sock", read_only=False)))
    )["mounts"]
    assert [(m["Type"], m["Source"], m["Target"], m["ReadOnly"]) for m in mounts] == [
        ("bind", "/host/program", "/program", True),
        ("bind", "/host/sock", "/sock", False),
    ]


def test_labels_command_tmpfs_and_environment_are_copies():
    original = spec(environment={"A": "1"})
    kwargs = to_docker_kwargs(original)
    assert kwargs["labels"] == LABELS
    assert kwargs["command"] == ["python3", "-m", "x"]
    kwargs["labels"]["intruder"] = "1"
    kwargs["labels"][MANAGED] = "false"
    kwargs["tmpfs"]["/data"] = "rw"
    kwargs["environment"]["B"] = "2"
    assert original.labels == LABELS
    assert original.tmpfs == {"/tmp": "rw,nosuid,nodev,noexec,size=64m"}
    assert original.environment == {"A": "1"}
    assert to_docker_kwargs(original)["labels"] == LABELS


def test_runtime_is_runc_unless_the_spec_asks_for_gvisor():
    assert to_docker_kwargs(spec())["runtime"] == "runc"
    assert to_docker_kwargs(spec(runtime="runsc"))["runtime"] == "runsc"


def test_gvisor_changes_only_the_runtime_not_the_hardening():
    runc, runsc = to_docker_kwargs(spec()), to_docker_kwargs(spec(runtime="runsc"))
    assert runsc.pop("runtime") == "runsc" and runc.pop("runtime") == "runc"
    assert runsc == runc


def test_run_spec_and_container_spec_offer_the_same_runtimes():
    from orchestrator.run.spec import SandboxSpec

    assert RUNTIMES == ("runc", "runsc")
    assert get_args(SandboxSpec.model_fields["runtime"].annotation) == RUNTIMES
    assert SandboxSpec().runtime == "runc"


def test_name_is_passed_only_when_given():
    assert "name" not in to_docker_kwargs(spec())
    assert to_docker_kwargs(spec(name="epg-policy-1"))["name"] == "epg-policy-1"


def test_default_specs_do_not_share_mutable_defaults():
    first, second = spec(), spec()
    first.tmpfs["/x"] = "rw"
    first.environment["K"] = "V"
    assert second.tmpfs == {"/tmp": "rw,nosuid,nodev,noexec,size=64m"}
    assert second.environment == {}


@pytest.mark.parametrize(
    "labels",
    [{}, {"other": "x"}, {MANAGED: "false"}, {MANAGED: "True"}, {MANAGED: "1"}],
    ids=repr,
)
def test_engine_refuses_a_spec_without_the_managed_label_before_touching_the_client(labels):
    engine = DockerEngine(client=None)
    unlabelled = ContainerSpec(image="img", command=("true",), labels=labels)
    with pytest.raises(ValueError, match="labels"):
        engine.start(unlabelled)
