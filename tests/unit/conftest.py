"""Fixtures shared by the unit tests of the model relay."""

from __future__ import annotations

import pytest
from support.relay_harness import FakeUpstream, clear_proxy_variables, serving


@pytest.fixture
def upstream(monkeypatch):
    """The fake upstream on loopback (/echo, /stall, /stall-mid, /big, ...); proxy variables cleared unless a test
    sets them. A module that needs another answer defines its own `upstream`."""
    clear_proxy_variables(monkeypatch)
    with serving(FakeUpstream()) as server:
        yield server
