"""The README and the docs site: a front page under 200 lines, links that resolve, a CLI reference generated from
the code, commands that exist, a strict offline build, and a tutorial whose steps do what it says."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest
import typer
import yaml
from support.cli import invoke_cli

from orchestrator.cli.app import app

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
CLI_PAGE = DOCS / "reference" / "cli.md"

FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _pages() -> list[Path]:
    """Every Markdown file of the site and the README (the hook folder holds Python only)."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def _without_code(text: str) -> str:
    """text without its fenced code blocks and inline code, where a bracket is not a link."""
    return re.sub(r"`[^`\n]*`", "", FENCE.sub("", text))


def _commands() -> dict[str, click.Command]:
    """Every command path of epg-orchestrate ('run', 'images build', ...) and its click command."""
    found: dict[str, click.Command] = {}

    def walk(command: click.Command, path: str, parent: click.Context | None) -> None:
        if not hasattr(command, "list_commands"):
            return  # a command, not a group
        context = command.context_class(command, info_name=path.split(" ")[-1] or "epg-orchestrate", parent=parent)
        for name in command.list_commands(context):  # the group's own listing, so a lazily loaded group is complete
            child = command.get_command(context, name)
            found[f"{path} {name}".strip()] = child
            walk(child, f"{path} {name}".strip(), context)

    walk(typer.main.get_command(app), "", None)
    return found


def _build(site: Path) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "NO_MKDOCS_2_WARNING": "1",
                   "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=ROOT,
                          env=environment, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built once with --strict into a temporary directory."""
    target = tmp_path_factory.mktemp("site")
    result = _build(target)
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stdout}\n{result.stderr}"
    return target


def test_readme_is_a_front_page_under_200_lines_naming_the_two_commands() -> None:
    text = README.read_text()
    assert len(text.splitlines()) < 200
    blocks = [match.group(0) for match in FENCE.finditer(text)]
    commands = [line.split("#")[0].strip() for block in blocks for line in block.splitlines()]
    assert "make demo" in commands and "make test" in commands
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^demo:", makefile, re.MULTILINE) and re.search(r"^test:", makefile, re.MULTILINE)
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_every_relative_link_in_readme_and_docs_resolves() -> None:
    broken = []
    checked = 0
    for page in _pages():
        for target in LINK.findall(_without_code(page.read_text())):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                continue  # a URL, or an anchor on the same page
            path = (page.parent / target.split("#")[0]).resolve()
            checked += 1
            if not path.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert checked > 50  # the README's table and the pages' cross-links were read
    assert broken == []


def test_every_epg_orchestrate_command_named_in_readme_and_docs_exists() -> None:
    commands = _commands()
    groups = {path for path, command in commands.items() if hasattr(command, "list_commands")}
    unknown = []
    named = 0
    for page in _pages():
        for words in re.findall(r"epg-orchestrate((?:[ \t]+[^\s`|;&)]+){1,2})", page.read_text()):
            first, *rest = words.split()
            if first.startswith("-") or not re.fullmatch(r"[a-z][a-z-]*", first):
                continue  # an option of the app (--version), or a placeholder
            named += 1
            path = first
            if first in groups and rest and re.fullmatch(r"[a-z][a-z-]*", rest[0]):
                path = f"{first} {rest[0]}"
            if path not in commands:
                unknown.append(f"{page.relative_to(ROOT)}: epg-orchestrate {path}")
    assert named > 50  # the synopsis, the tour, the tutorial and the how-to pages
    assert unknown == []


def test_every_option_in_a_command_line_of_readme_and_docs_belongs_to_its_command() -> None:
    """The synopsis and every example command line in a code block: `--x` after `epg-orchestrate CMD` is CMD's option."""
    commands = _commands()
    wrong = []
    lines = 0
    for page in _pages():
        for block in (match.group(0) for match in FENCE.finditer(page.read_text())):
            for line in block.replace("\\\n", " ").splitlines():
                line = line.split(" #")[0]
                match = re.match(r"\s*(?:\S+/)?epg-orchestrate\s+([a-z][a-z-]*)(?:\s+([a-z][a-z-]*))?", line)
                if not match:
                    continue
                path = " ".join(filter(None, match.groups()))
                if path not in commands:
                    path = match.group(1)
                if path not in commands:
                    continue  # an unknown command: test_every_epg_orchestrate_command_named_in_readme_and_docs_exists says so
                lines += 1
                known = {option for param in commands[path].params for option in getattr(param, "opts", [])} | {"--help"}
                wrong += [f"{page.relative_to(ROOT)}: {path} {option}"
                          for option in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", line[match.end():]) if option not in known]
    assert lines > 40
    assert wrong == []


def test_cli_reference_page_is_generated_by_its_directive_not_written_by_hand() -> None:
    text = CLI_PAGE.read_text()
    assert "::: mkdocs-click" in text
    assert ":module: epg_cli_reference" in text and ":command: command" in text
    options = {option for command in _commands().values() for param in command.params
               for option in getattr(param, "opts", []) if option.startswith("--") and option != "--help"}
    assert len(options) > 30
    assert [option for option in options if option in text] == []


def test_strict_build_puts_every_command_and_option_of_the_app_in_the_cli_reference(site: Path) -> None:
    page = (site / "reference" / "cli.html").read_text()
    missing = [path for path in _commands() if f"epg-orchestrate {path}" not in page]
    assert missing == []
    options = {option for command in _commands().values() for param in command.params
               for option in getattr(param, "opts", []) if option.startswith("--")}
    assert [option for option in sorted(options) if option not in page] == []


def test_built_site_fetches_nothing_from_the_network(site: Path) -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert config["theme"]["font"] is False
    remote = []
    for page in site.rglob("*.html"):
        for tag in re.findall(r"<(?:link|script|img|iframe)\b[^>]*>", page.read_text()):
            if re.search(r"(?:src|href)=\"(?:https?:)?//", tag):
                remote.append(f"{page.relative_to(site)}: {tag}")
    assert remote == []


def test_architecture_page_includes_the_root_file_and_the_changelog_is_in_the_site(site: Path) -> None:
    architecture = (site / "architecture.html").read_text()
    for heading in re.findall(r"^## (.+)$", (ROOT / "ARCHITECTURE.md").read_text(), re.MULTILINE):
        assert heading.split("`")[0].strip() in architecture
    changelog = (site / "changelog.html").read_text()
    for entry in ("Unreleased", "session_closed", "--allow-credential", "make bench-diff", "--durations"):
        assert entry in changelog


def test_tutorial_policy_beats_the_baseline_and_its_run_spec_checks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tutorial's steps, in plain local processes: its params.json, its spec edit, `spec check` of the result."""
    monkeypatch.syspath_prepend(str(ROOT / "environments" / "cartpole"))  # as the package's own tests import it
    from epg_env_cartpole import make_benchmark
    from epg_sdk.testing import evaluate_locally

    tutorial = (DOCS / "tutorial.md").read_text()
    assert "cp -r environments/cartpole/baseline mine/policy" in tutorial
    params = json.loads(re.search(r"```json\n(.*?)```", tutorial, re.DOTALL).group(1))
    mine = tmp_path / "mine"
    shutil.copytree(ROOT / "environments" / "cartpole" / "baseline", mine / "policy")
    (mine / "policy" / "params.json").write_text(json.dumps(params))

    benchmark = make_benchmark()
    improved = evaluate_locally(benchmark, mine / "policy", episodes=8, seed=0).score
    baseline = evaluate_locally(benchmark, ROOT / "environments" / "cartpole" / "baseline", episodes=8, seed=0).score
    assert improved > 400 > 100 > baseline

    line = re.search(r"```yaml\n(initial_program: [^\n]*)\n```", tutorial).group(1)
    spec = (ROOT / "examples" / "cartpole.yaml").read_text().replace("seed: 0\n", f"seed: 0\n{line}\n", 1)
    assert line in spec
    (mine / "run.yaml").write_text(spec)
    result = invoke_cli("spec", "check", str(mine / "run.yaml"), "--json")
    assert result.exit_code == 0, result.stdout + result.stderr
    assert json.loads(result.stdout)["valid"] is True
