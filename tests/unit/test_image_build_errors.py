"""A failed `docker build` is one IMAGE_BUILD_FAILED infrastructure error: the engine's reason, the build log's tail as evidence."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from docker.errors import APIError

from orchestrator.images.builder import ImageBuilder
from orchestrator.kernel.infrastructure import InfraErrorCode, InfrastructureError

TAG = "epg/env-x:0123abcd"


class FakeBuildApi:
    """The engine's build stream: chunks as docker-py decodes them, then optionally an API error."""

    def __init__(self, chunks: list[dict[str, Any]], error: Exception | None = None) -> None:
        self.chunks = chunks
        self.error = error
        self.read = 0

    def build(self, **options: Any) -> Iterator[dict[str, Any]]:
        for chunk in self.chunks:
            self.read += 1
            yield chunk
        if self.error is not None:
            raise self.error


def _build(tmp_path, api: FakeBuildApi) -> InfrastructureError:
    builder = ImageBuilder(SimpleNamespace(api=api), base="sha256:base", cache_dir=tmp_path / "cache", checkout=tmp_path)  # type: ignore[arg-type]
    with pytest.raises(InfrastructureError) as raised:
        builder._docker_build(tmp_path, TAG, {}, {})
    return raised.value


def test_an_error_in_the_build_stream_is_an_image_build_failure_with_its_reason_and_the_log_tail(tmp_path):
    steps = [{"stream": f"Step {n}/80 : RUN step-{n}\n"} for n in range(80)]
    api = FakeBuildApi([*steps, {"error": "The command '/bin/sh -c false' returned a non-zero code: 1"}, {"stream": "after\n"}])
    error = _build(tmp_path, api)
    assert error.code is InfraErrorCode.IMAGE_BUILD_FAILED
    assert error.message == f"docker build of {TAG} failed: The command '/bin/sh -c false' returned a non-zero code: 1"
    assert error.evidence.splitlines() == [f"Step {n}/80 : RUN step-{n}" for n in range(20, 80)]
    assert api.read == 81  # the build is not read past its error


def test_an_engine_refusal_during_the_build_is_an_image_build_failure_with_the_log_so_far(tmp_path):
    api = FakeBuildApi([{"stream": "Step 1/2 : FROM base\n"}], error=APIError("500 Server Error: no space left on device"))
    error = _build(tmp_path, api)
    assert error.code is InfraErrorCode.IMAGE_BUILD_FAILED
    assert error.message.startswith(f"docker build of {TAG} failed: 500 Server Error") and "no space left on device" in error.message
    assert error.evidence == "Step 1/2 : FROM base"
    assert isinstance(error.__cause__, APIError)


def test_the_reason_in_the_message_is_bounded(tmp_path):
    error = _build(tmp_path, FakeBuildApi([{"error": "x" * 5000}]))
    assert error.message == f"docker build of {TAG} failed: " + "x" * 300
