"""gVisor (runsc) asked of an engine that lacks it: a clear infrastructure error before anything starts.

The policy failures under runsc are tested beside runc's in test_hostile_policies.py.
"""

from __future__ import annotations

import secrets

import pytest

from orchestrator.backends.engine import DockerEngine
from orchestrator.backends.labels import LabelSet, owner_id, selector
from orchestrator.backends.sandbox import DockerSandbox
from orchestrator.backends.settings import SandboxImages, SandboxTuning
from orchestrator.kernel.infrastructure import InfraErrorCode, InfrastructureError


class _EngineWithout:
    """The real engine's client, except that `docker info` does not list one runtime."""

    def __init__(self, client, missing: str) -> None:
        self._client = client
        self._missing = missing

    def info(self) -> dict:
        info = self._client.info()
        return info | {"Runtimes": {k: v for k, v in info["Runtimes"].items() if k != self._missing}}

    def __getattr__(self, name: str):
        return getattr(self._client, name)


def test_runsc_missing_from_the_engine_is_an_infrastructure_error_naming_the_fix(engine, images, scope):
    without = DockerEngine(_EngineWithout(engine.client, "runsc"))
    labels = LabelSet(sandbox=secrets.token_hex(6), owner=owner_id(), scope=scope)
    sandbox_images = SandboxImages(environment=images["env-cartpole"], policy_runtime=images["policy-runtime"],
                                   benchmark_entry="epg_env_cartpole:make_benchmark")
    with pytest.raises(InfrastructureError) as caught:
        with DockerSandbox(without, sandbox_images, labels=labels, tuning=SandboxTuning(pool_size=1, runtime="runsc")):
            pass
    assert caught.value.code is InfraErrorCode.ENGINE_UNAVAILABLE
    assert "runsc" in caught.value.message and "scripts/ensure-docker.sh" in caught.value.message
    # Refused before anything started.
    assert engine.client.containers.list(all=True, filters={"label": selector(sandbox=labels.sandbox)}, sparse=True) == []
