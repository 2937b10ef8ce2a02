"""Which part of an environment's README reaches the agent's task (TASK.md): the blocks between the agent markers."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from epg_sdk.readme import AGENT_BEGIN, AGENT_END, ReadmeMarkerError, agent_section, package_readme
from epg_sdk.runtime.runner import describe
from orchestrator.images.catalogue import load_package
from orchestrator.kernel.ports import BenchmarkInfo
from orchestrator.kernel.session import Budget
from orchestrator.protocol.runner_messages import benchmark_info
from orchestrator.run.instructions import render_instructions

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = sorted(p.parent.name for p in (ROOT / "environments").glob("*/pyproject.toml"))
BUDGET = Budget(episodes=64, max_submissions=8, pool_size=32)
# Headings a maintainer writes for maintainers: none of them may reach the agent.
MAINTAINER_HEADINGS = {"Versions", "Tests", "Programs", "Baseline", "Measured", "Held-out means", "Rendering"}


def _headings(markdown: str) -> set[str]:
    return {m.group(1).strip() for m in re.finditer(r"^#{1,6} (.+)$", markdown, flags=re.MULTILINE)}


def _readme_part(task: str) -> str:
    return task.split("\n## The benchmark's README\n", 1)[1]


def _benchmarks(package: str, monkeypatch) -> list[BenchmarkInfo]:
    """Each Benchmark of a package as the orchestrator receives it: the package's factory, the runner's Describe."""
    root = ROOT / "environments" / package
    monkeypatch.syspath_prepend(str(root))
    infos = []
    for entry in load_package(root).table.benchmarks.values():
        module, _, factory = entry.partition(":")
        infos.append(benchmark_info(describe(getattr(importlib.import_module(module), factory)())))
    return infos


def test_every_environment_package_has_benchmarks():
    assert len(PACKAGES) == 8 and "cartpole" in PACKAGES


@pytest.mark.parametrize("package", PACKAGES)
def test_task_holds_the_readme_agent_sections_and_no_maintainer_section(package, monkeypatch):
    readme = (ROOT / "environments" / package / "README.md").read_text(encoding="utf-8")
    maintainer = _headings(readme) & MAINTAINER_HEADINGS
    assert maintainer, f"{package}'s README has no maintainer section this test could look for"
    agent = agent_section(readme)
    infos = _benchmarks(package, monkeypatch)
    assert infos
    for info in infos:
        told = _readme_part(render_instructions(info, BUDGET))
        headings = _headings(told)
        assert "Feedback" in headings, info.id
        for word in ("bservation", "ction", "eward", "orizon"):
            assert word in told, (info.id, word)
        assert not headings & MAINTAINER_HEADINGS, (info.id, headings & MAINTAINER_HEADINGS)
        assert AGENT_BEGIN not in told and AGENT_END not in told
        assert told.strip() == agent.strip()
        # Pins stay with the maintainers: no "Versions" paragraph, no lock file, no test command.
        assert "requirements.lock" not in told and "tests/image" not in told


@pytest.mark.parametrize("package", PACKAGES)
def test_maintainer_text_of_every_readme_stays_out_of_the_task(package, monkeypatch):
    readme = (ROOT / "environments" / package / "README.md").read_text(encoding="utf-8")
    outside = [line for line in re.split(r"<!-- agent:begin -->.*?<!-- agent:end -->", readme, flags=re.DOTALL)]
    kept_out = [line.strip() for block in outside for line in block.splitlines() if len(line.strip()) > 30]
    assert kept_out
    told = _readme_part(render_instructions(_benchmarks(package, monkeypatch)[0], BUDGET))
    leaked = [line for line in kept_out if line in told]
    assert not leaked


def test_readme_without_markers_reaches_the_agent_whole():
    readme = "# Probe\n\n## Observation\n\nA float.\n\n## Tests\n\nRun pytest.\n"
    assert agent_section(readme) == readme
    info = BenchmarkInfo(id="P-v0", description="d", observation_space={}, action_space={}, horizon=3,
                         primary_metric="mean_return", direction="maximize", parameters={}, failure_return=0.0,
                         readme=readme)
    assert _readme_part(render_instructions(info, BUDGET)).strip() == readme.strip()


def test_several_agent_blocks_reach_the_agent_in_order_and_nothing_between_them():
    readme = (f"# T\n\nintro for maintainers\n\n{AGENT_BEGIN}\nA first\n\n{AGENT_END}\n\n## Versions\n\npinned\n\n"
              f"  {AGENT_BEGIN}  \n\n## Feedback\n\nscores\n{AGENT_END}\n## Tests\n")
    assert agent_section(readme) == "A first\n\n## Feedback\n\nscores\n"


def test_a_readme_already_cut_is_cut_again_to_the_same_text():
    once = agent_section(f"x\n{AGENT_BEGIN}\n## Observation\n\nfloat\n{AGENT_END}\ny\n")
    assert agent_section(once) == once


@pytest.mark.parametrize(
    ("readme", "message"),
    [
        (f"{AGENT_BEGIN}\nA\n", "without its <!-- agent:end -->"),
        (f"A\n{AGENT_END}\n", "line 2: <!-- agent:end --> without its"),
        (f"{AGENT_BEGIN}\nA\n{AGENT_BEGIN}\nB\n{AGENT_END}\n", "line 3: <!-- agent:begin --> inside a block"),
        (f"{AGENT_END}\nA\n{AGENT_BEGIN}\n", "line 1"),
    ],
)
def test_malformed_agent_markers_are_refused_with_the_line(readme, message):
    with pytest.raises(ReadmeMarkerError, match=re.escape(message)):
        agent_section(readme)


def test_package_readme_cuts_the_readme_beside_the_module_in_an_image_and_at_the_root_in_a_checkout(tmp_path):
    readme = f"# T\n\n## Tests\n\nmaintainers\n\n{AGENT_BEGIN}\n## Action\n\nan int\n{AGENT_END}\n"
    checkout = tmp_path / "checkout"
    (checkout / "epg_env_t").mkdir(parents=True)
    (checkout / "README.md").write_text(readme)
    image = tmp_path / "image" / "epg_env_t"
    image.mkdir(parents=True)
    (image / "README.md").write_text(readme)
    for module_dir in (checkout / "epg_env_t", image):
        assert package_readme(str(module_dir / "__init__.py")) == "## Action\n\nan int\n"
    assert package_readme(str(tmp_path / "none" / "m" / "__init__.py")) == ""
