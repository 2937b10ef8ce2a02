"""The one sandbox seam: both backends implement kernel.ports.PooledSandbox (pool control included), and the
container pool they hand out implements ContainerPoolControl; `sandbox_opening.open_sandbox` yields either.

mypy checks the same statically: open_sandbox's `yield` gives a DockerSandbox or a KubernetesSandbox where a
PooledSandbox is declared. The Docker tests check isinstance on opened sandboxes (test_k8s_backend.py).
"""

from __future__ import annotations

import inspect
from typing import Generic, Protocol

import pytest

from orchestrator.backends.kubernetes.sandbox import KubernetesSandbox
from orchestrator.backends.pool import ContainerPool, Slot
from orchestrator.backends.sandbox import DockerSandbox
from orchestrator.backends.settings import SandboxTuning
from orchestrator.kernel.ports import ContainerPoolControl, EpisodeSandbox, PooledSandbox


def members(protocol: type) -> dict[str, object]:
    """Every public member a Protocol declares, its own and its bases'."""
    found: dict[str, object] = {}
    for klass in reversed(protocol.__mro__):
        if klass in (object, Protocol, Generic):
            continue
        found.update({name: value for name, value in vars(klass).items() if not name.startswith("_")})
    return found


def parameters(member: object) -> list[str]:
    function = member.fget if isinstance(member, property) else member
    return list(inspect.signature(function).parameters)


def test_the_seam_declares_the_pool_control_and_the_images_the_commands_use():
    assert {"describe", "plan", "run_episodes", "feedback"} <= set(members(EpisodeSandbox))
    assert set(members(PooledSandbox)) == {"describe", "plan", "run_episodes", "feedback", "container_pool", "images", "image_ids"}
    assert set(members(ContainerPoolControl)) == {"resize", "expect", "ready_count", "cancel_batch"}


@pytest.mark.parametrize("backend", [DockerSandbox, KubernetesSandbox], ids=lambda backend: backend.__name__)
def test_each_backend_defines_every_member_of_the_seam_with_its_parameters(backend):
    for name, declared in members(PooledSandbox).items():
        defined = inspect.getattr_static(backend, name, None)
        assert defined is not None, f"{backend.__name__} lacks {name}"
        assert isinstance(defined, property) == isinstance(declared, property), name
        assert parameters(defined) == parameters(declared), name
    assert not hasattr(backend, "pool"), "the container pool is called container_pool, not pool"


def test_the_container_pool_is_the_pool_control_of_the_seam():
    for name, declared in members(ContainerPoolControl).items():
        assert parameters(inspect.getattr_static(ContainerPool, name)) == parameters(declared), name
    pool = ContainerPool.for_tuning(SandboxTuning(pool_size=0), lanes=1, start_slot=lambda lane: Slot(lane=lane, name="s", io_dir=None,
                                                                                                       program_dir=None),
                                    destroy=lambda slot: None)
    try:
        assert isinstance(pool, ContainerPoolControl)
    finally:
        pool.close()
