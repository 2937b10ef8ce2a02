"""What produced a record: software versions, images (tag and id), the Benchmark package, times.

run.json and evaluation.json carry these fields, so that a Run or an evaluation
can be reproduced from its records alone (with the same seed key).
"""

from __future__ import annotations

import platform
import time
from importlib import metadata
from typing import Any

import orchestrator


def software() -> dict[str, str]:
    """The versions of the orchestrator, the SDK and the Host's Python."""
    return {
        "orchestrator": orchestrator.__version__,
        "epg_sdk": _distribution_version("epg-sdk"),
        "policy_abi": str(orchestrator.ABI_VERSION),
        "python": platform.python_version(),
    }


def _distribution_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return ""


def image(tag: str, image_id: str) -> dict[str, str]:
    return {"tag": tag, "id": image_id}


def benchmark_package(distribution: str, version: str, image_name: str) -> dict[str, str]:
    return {"name": distribution, "version": version, "image": image_name}


def utc_now() -> str:
    """The current time as ISO 8601 UTC with seconds, e.g. 2026-12-01T11:40:34Z."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def timing(started_at: str, wall_seconds: float) -> dict[str, Any]:
    return {"started_at": started_at, "ended_at": utc_now(), "wall_seconds": round(wall_seconds, 3)}
