"""Sandboxes on one environment package alone, for engine tests of that package's Benchmarks."""

from __future__ import annotations

import secrets
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Callable, Iterator

from orchestrator.backends.engine import DockerEngine
from orchestrator.backends.labels import LabelSet, owner_id
from orchestrator.backends.sandbox import DockerSandbox
from orchestrator.backends.settings import SandboxImages, SandboxLimits, SandboxTuning
from orchestrator.images.builder import ImageBuilder
from orchestrator.images.catalogue import load_package, resolve_benchmark


def package_sandbox_factory(engine: DockerEngine, package: Path, image: str, scope: str, *,
                            pool_size: int) -> Callable[[str], AbstractContextManager[DockerSandbox]]:
    """Build (or find) the policy runtime and the package's environment image from this package alone (other packages'
    state does not matter); return a factory: factory(name) -> a started DockerSandbox on that image for the Benchmark
    named, labelled with scope, keeping pool_size policy containers ready.

    Raises what ImageBuilder.ensure raises when an image cannot be built; the factory raises what resolve_benchmark and
    DockerSandbox raise.
    """
    builder = ImageBuilder(engine.client, environments=[package], progress=print)
    tags = {result.name: result.tag for result in builder.ensure(["policy-runtime", image])}
    packages = [load_package(package)]

    @contextmanager
    def factory(name: str) -> Iterator[DockerSandbox]:
        _package, _benchmark_id, entry = resolve_benchmark(name, packages)
        images = SandboxImages(environment=tags[image], policy_runtime=tags["policy-runtime"], benchmark_entry=entry)
        labels = LabelSet(sandbox=secrets.token_hex(6), owner=owner_id(), scope=scope)
        with DockerSandbox(engine, images, SandboxLimits(), labels, tuning=SandboxTuning(pool_size=pool_size)) as sandbox:
            yield sandbox

    return factory
