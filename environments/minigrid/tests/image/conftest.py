"""The image tests need the orchestrator's pytest plugin (`epg`) and a Docker engine; without the plugin they skip, saying so.

In a venv holding only epg-sdk and this package, `pytest tests` passes the package's own tests and
reports these as skipped with the reason below. Wherever the plugin is loaded (the orchestrator is
installed, as in its own test run) nothing here skips: a missing engine fails these tests.
"""

from __future__ import annotations

from pathlib import Path

import pytest

NEEDS_PLUGIN = ("image test: needs the epg pytest plugin and a Docker engine "
                "(pip install 'epg-orchestrator[pytest]', then run pytest where Docker answers)")
HERE = Path(__file__).resolve().parent


def pytest_configure(config: pytest.Config) -> None:
    # Declared here too, so that the test modules' `docker` mark is known without the plugin.
    config.addinivalue_line("markers", "docker: needs the real Docker engine")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip every test below this directory, with NEEDS_PLUGIN as the reason, when the `epg` plugin is not loaded."""
    if config.pluginmanager.hasplugin("epg"):
        return
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.skip(reason=NEEDS_PLUGIN))
