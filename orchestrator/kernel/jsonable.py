"""Turn decoded values (which may hold NumPy arrays and bytes) into JSON-ready data."""

from __future__ import annotations

import base64
from typing import Any


def jsonable(value: Any) -> Any:
    """Return value with arrays as lists, bytes as base64 text and tuples as lists."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return {"base64": base64.b64encode(bytes(value)).decode()}
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        return jsonable(tolist())
    if isinstance(value, float) and value != value:
        return None
    return value
