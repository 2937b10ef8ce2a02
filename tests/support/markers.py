"""Which tests carry the markers of the expensive groups (`slow`, `agents`, `kubernetes`, `browser`): one table.

`docker` is not here: tests/conftest.py gives it to every test in tests/docker and every user of the `engine` fixture.
"""

from __future__ import annotations

# marker -> the tests it marks: a path relative to the repository (every test of that file or directory) or a node id
# (that test, every parametrization of it).
MARKED: dict[str, tuple[str, ...]] = {
    # real coding-agent CLIs (Codex, Claude Code, Gemini and the like) in their agent images
    "agents": (
        "tests/docker/test_cli_agents.py",
        "tests/docker/test_node_cli_agents.py",
        "tests/docker/test_more_cli_agents.py",
        "tests/docker/test_agent_skills_run.py::test_claude_code_finds_the_skills_where_it_looks_and_runs_them_through_evopolicygym_session",
    ),
    # the Kubernetes backend, against the fake API server and kubelet (or a real cluster when KUBECONFIG is set)
    "kubernetes": (
        "tests/docker/test_k8s_backend.py",
        "tests/docker/test_k8s_conformance.py",
    ),
    # headless Chromium renders a page
    "browser": (
        "tests/docker/test_run_reports.py::test_report_page_renders_every_plot_in_headless_chromium_without_network",
        "tests/docker/test_run_reports.py::test_the_browser_check_sees_a_page_that_asks_for_the_network",
        "tests/docker/test_suite_run.py::test_a_killed_suite_resumes_and_its_report_ranks_the_agents",
        "tests/docker/test_view.py",
    ),
    # about 10 s or more on a 2-core machine: a whole Run or suite, an image or venv built, a benchmark's long rollout
    "slow": (
        "tests/docker/test_agent_skills_run.py",
        "tests/docker/test_cli_agents.py",
        "tests/docker/test_node_cli_agents.py",
        "tests/docker/test_more_cli_agents.py",
        "tests/docker/test_k8s_backend.py",
        "tests/docker/test_k8s_conformance.py",
        "tests/docker/test_ci_workflow.py",
        "tests/docker/test_tutorial.py",
        "tests/docker/test_view.py::test_view_follows_a_real_cartpole_run_to_finished_and_shows_its_records_without_network",
        "tests/docker/test_env_test.py",
        "tests/docker/test_evopolicygym_sandbox.py",
        "tests/docker/test_feedback_access.py",
        "tests/docker/test_hostile_agents.py",
        "tests/docker/test_registry.py",
        "tests/docker/test_relay_flood.py",
        "tests/docker/test_relay_runs.py",
        "tests/docker/test_run_fetch.py",
        "tests/docker/test_run_highway.py",
        "tests/docker/test_run_minigrid.py",
        "tests/docker/test_run_mujoco.py",
        "tests/docker/test_run_prestart.py",
        "tests/docker/test_run_reports.py",
        "tests/docker/test_runs.py",
        "tests/docker/test_secret_episodes.py",
        "tests/docker/test_suite_run.py",
        "tests/packaging/test_fresh_venvs.py",
        "tests/packaging/test_orchestrator_wheel.py",
        "environments/acrobot/tests/image",
        "environments/box2d/tests/image",
        "environments/cartpole/tests/image",
        "environments/fetch/tests/image",
        "environments/highway/tests/image",
        "environments/minigrid/tests/image",
        "environments/mountaincar_continuous/tests/image",
        "environments/mujoco/tests/image",
    ),
}


def marked_by_table(nodeid: str, marker: str) -> bool:
    """Whether MARKED gives marker to the test with this node id (relative to the repository)."""
    return any(nodeid == entry or nodeid.startswith((entry + "/", entry + "::", entry + "[")) for entry in MARKED[marker])
