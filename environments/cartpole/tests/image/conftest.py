"""The image tests need the orchestrator's pytest plugin (`epg`) and a Docker engine: without the plugin (a venv with
the SDK and this package alone) they skip, saying so; wherever it is loaded nothing skips (epg_sdk.testing)."""

from epg_sdk.testing import pytest_collection_modifyitems, pytest_configure  # noqa: F401  (this folder's pytest hooks)
