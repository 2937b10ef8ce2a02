"""Real coding-agent CLIs with native executables (Codex, Claude Code) in their containers, driven through the Host's
model relay by a fake provider."""

from __future__ import annotations

import pytest
from cli_runs import assert_finished_through_the_relay, assert_submitted_and_finished_through_mcp, fake_provider, run_cli_agent


@pytest.mark.parametrize("kind", ["codex", "claude-code"])
def test_cli_agent_run_is_driven_through_the_relay_and_ends_finished(kind, tmp_path, scope, builder):
    with fake_provider(tmp_path) as (upstream, provider_log):
        manifest, run_dir = run_cli_agent({"kind": kind, "model": "fake-model", "effort": "low"}, upstream, tmp_path, scope)
    assert_finished_through_the_relay(manifest, run_dir, provider_log)
    assert_submitted_and_finished_through_mcp(run_dir, provider_log)
