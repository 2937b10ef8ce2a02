"""Fixtures for tests against the real Docker engine.

A missing engine fails these tests: they are never skipped. Every resource a
test run creates carries this run's scope label; at the end of the session
nothing with that label may remain.
"""

from __future__ import annotations

import secrets
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Iterator

import pytest

from orchestrator.backends.engine import DockerEngine
from orchestrator.backends.labels import LabelSet, owner_id, selector
from orchestrator.backends.sandbox import DockerSandbox
from orchestrator.backends.settings import SandboxImages, SandboxLimits, SandboxTuning
from orchestrator.images.builder import ImageBuilder
from orchestrator.images.catalogue import DEFAULT_ENVIRONMENTS, resolve_benchmark
from orchestrator.kernel.infrastructure import InfrastructureError

REPO = Path(__file__).resolve().parents[2]
TEST_ENVIRONMENTS = REPO / "tests" / "environments"
ENVIRONMENT_ROOTS = [DEFAULT_ENVIRONMENTS, TEST_ENVIRONMENTS]


@pytest.fixture(scope="session")
def engine() -> DockerEngine:
    try:
        return DockerEngine.connect()
    except InfrastructureError as exc:
        pytest.fail(f"these tests need a Docker engine: {exc} ({exc.evidence})", pytrace=False)


@pytest.fixture(scope="session")
def scope(engine: DockerEngine) -> Iterator[str]:
    """A label value unique to this test run; checks for leftovers at the end."""
    value = f"test-{secrets.token_hex(5)}"
    yield value
    leftovers = engine.client.containers.list(all=True, filters={"label": selector(scope=value)}, sparse=True)
    networks = engine.client.networks.list(filters={"label": selector(scope=value)})
    volumes = engine.client.volumes.list(filters={"label": selector(scope=value)})
    engine.reap(selector(scope=value))
    assert not (leftovers or networks or volumes), f"the test run left {leftovers} {networks} {volumes}"


@pytest.fixture(scope="session")
def builder(engine: DockerEngine) -> ImageBuilder:
    return ImageBuilder(engine.client, environments=ENVIRONMENT_ROOTS, progress=print)


@pytest.fixture(scope="session")
def images(builder: ImageBuilder) -> dict[str, str]:
    """Build (or find) every image the tests use; return name -> tag."""
    return {result.name: result.tag for result in builder.ensure(["policy-runtime", "env-cartpole", "env-probe"])}


@pytest.fixture(scope="session")
def open_sandbox(engine: DockerEngine, images: dict[str, str], builder: ImageBuilder, scope: str):
    """Return a context manager factory: open_sandbox(benchmark, limits, tuning, runtime) -> started DockerSandbox.

    runtime, when given, replaces tuning.runtime (the OCI runtime of the policy containers).
    """

    @contextmanager
    def factory(
        benchmark: str = "CartPole-v1", limits: SandboxLimits = SandboxLimits(), tuning: SandboxTuning = SandboxTuning(pool_size=2),
        runtime: str | None = None,
    ) -> Iterator[DockerSandbox]:
        if runtime is not None:
            tuning = replace(tuning, runtime=runtime)
        package, _, entry = resolve_benchmark(benchmark, builder.packages())
        sandbox_images = SandboxImages(environment=images[package.image], policy_runtime=images["policy-runtime"], benchmark_entry=entry)
        labels = LabelSet(sandbox=secrets.token_hex(6), owner=owner_id(), scope=scope)
        with DockerSandbox(engine, sandbox_images, limits, labels, tuning=tuning) as sandbox:
            yield sandbox

    return factory
