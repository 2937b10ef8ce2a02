"""The tutorial (docs/tutorial.md), followed literally in a fresh clone of this repository.

Every `sh` block of the page runs as written, line by line, in the clone, with this test run's
`epg-orchestrate` first on PATH. Two lines are stood in for, each checked to be what the page says:
`make demo` runs the Makefile's demo command (setup and the engine are this test run's), and
`. .venv/bin/activate` is the PATH above. The `json` and `yaml` blocks are the edits the page asks for,
made as it describes them. The outputs are checked against the page's `text` blocks and claims.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TUTORIAL = REPO / "docs" / "tutorial.md"


@dataclass(frozen=True)
class Block:
    section: str
    language: str
    text: str


def blocks() -> list[Block]:
    """The fenced blocks of the tutorial, each with the `## ` section it is in."""
    found, section, language, lines = [], "", None, []
    for line in TUTORIAL.read_text().splitlines():
        if language is None and line.startswith("## "):
            section = line[3:].strip()
        elif language is None and line.startswith("```"):
            language, lines = line[3:].strip(), []
        elif language is not None and line.startswith("```"):
            found.append(Block(section, language, "\n".join(lines) + "\n"))
            language = None
        elif language is not None:
            lines.append(line)
    return found


def commands(block: Block) -> list[str]:
    return [line for line in block.text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def makefile_recipe(target: str) -> list[str]:
    """The command lines of a Makefile target, with $(BIN)/ dropped (the venv's bin is on PATH)."""
    lines = (REPO / "Makefile").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{target}:"))
    recipe = []
    for line in lines[start + 1:]:
        if not line.startswith("\t"):
            break
        recipe.append(line.strip().replace("$(BIN)/", ""))
    return recipe


class Shell:
    """Runs lines in the clone, as a user who activated the venv would."""

    def __init__(self, clone: Path, scope: str) -> None:
        self.clone = clone
        self.env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", "EPG_SCOPE": scope,
                    "NO_COLOR": "1", "COLUMNS": "200"}
        # The clone's own code is what runs (this test run's venv may have another checkout installed editable).
        self.env["PYTHONPATH"] = str(clone) + os.pathsep + str(clone / "sdk")

    def run(self, line: str, timeout: float = 900) -> str:
        """Run line; return what it printed (stdout, then stderr, where the progress lines go)."""
        result = subprocess.run(["bash", "-c", line], cwd=self.clone, env=self.env, capture_output=True, text=True, timeout=timeout)
        assert result.returncode == 0, f"{line!r} exited {result.returncode}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        return result.stdout + result.stderr


def summary(output: str) -> dict[str, str]:
    """The `key: value` lines a Run prints at its end."""
    keys = ("Run directory", "terminal reason", "selected", "assessment score", "starting Program on the same Episodes")
    found = {}
    for line in output.splitlines():
        key, sep, value = line.partition(": ")
        if sep and key.strip() in keys:
            found[key.strip()] = value.strip()
    return found


def test_the_tutorial_followed_literally_in_a_fresh_clone_improves_on_the_baseline(tmp_path, scope):
    clone = tmp_path / "epg-orchestrator"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True, timeout=300)
    shell = Shell(clone, scope)
    by_section: dict[str, list[Block]] = {}
    for block in blocks():
        by_section.setdefault(block.section.split(".")[0], []).append(block)

    # 1. Clone and run the demo.
    first = [b for b in by_section["1"] if b.language == "sh"]
    assert commands(first[0])[0].startswith("git clone ") and commands(first[0])[-1] == "make demo"
    demo = makefile_recipe("demo")
    assert demo == ["epg-orchestrate run examples/cartpole.yaml"], demo
    demo_output = shell.run(demo[0])
    expected_lines = next(b for b in by_section["1"] if b.language == "text" and "score" in b.text)
    pattern = re.compile(r"s\d{4}\s+score\s+-?[\d.]+\s+best\s+-?[\d.]+\s+Episodes left \d+/96\s+Submissions left \d+")
    assert all(pattern.fullmatch(line) for line in expected_lines.text.splitlines() if line.startswith("s0")), expected_lines.text
    assert any(pattern.fullmatch(line.strip()) for line in demo_output.splitlines()), demo_output[-3000:]
    ended = summary(demo_output)
    assert ended["terminal reason"] == "finish_called"
    assert re.fullmatch(r"runs/cartpole-v1-\S+", ended["Run directory"]), ended
    assert re.fullmatch(r"s\d{4} \(sha256:[0-9a-f]{64}\)", ended["selected"]), ended
    assert float(ended["assessment score"]) > float(ended["starting Program on the same Episodes"]) + 50, ended
    manifest = json.loads((clone / ended["Run directory"] / "run.json").read_text())
    assert manifest["terminal_reason"] == "finish_called" and manifest["final"]["is_initial_program"] is False
    activate = commands(first[1])
    assert activate[0] == ". .venv/bin/activate"
    assert re.search(r"\d+\.\d+", shell.run(activate[1]))

    # 2. Read the run directory: every line runs, and the files it names are there.
    outputs = {line: shell.run(line) for block in by_section["2"] if block.language == "sh" for line in commands(block)}
    listed = next(out for line, out in outputs.items() if line.startswith("epg-orchestrate runs list"))
    assert ended["Run directory"].removeprefix("runs/") in listed and "finish_called" in listed
    run_dir = clone / ended["Run directory"]
    assert (run_dir / "report.html").stat().st_size > 0
    assert "s0001" in next(out for line, out in outputs.items() if line.startswith("epg-orchestrate runs show"))
    assert '"score"' in next(out for line, out in outputs.items() if "feedback.json" in line)

    # 3. Write a policy: the page's commands, then its params.json.
    for block in by_section["3"]:
        if block.language == "sh":
            for line in commands(block):
                shell.run(line)
        elif block.language == "json":
            (clone / "mine" / "policy" / "params.json").write_text(block.text)
    assert (clone / "mine" / "policy" / "policy.py").read_bytes() == (clone / "environments/cartpole/baseline/policy.py").read_bytes()

    # 4. Evaluate it in the sandbox: mine beats the baseline on the same Episodes.
    evaluations = [line for block in by_section["4"] if block.language == "sh" for line in commands(block)]
    assert [shlex.split(line)[:3] for line in evaluations] == [["epg-orchestrate", "evaluate", "mine/policy"],
                                                               ["epg-orchestrate", "evaluate", "environments/cartpole/baseline"]]
    scores = []
    for line in evaluations:
        found = re.search(r"score \(mean_return\): (-?[\d.]+)", shell.run(line))
        assert found, line
        scores.append(float(found.group(1)))
    assert scores[0] > scores[1] + 100, scores

    # 5. Run an agent from your policy: copy the spec, add the line below `seed: 0`, check it, run it.
    fifth = by_section["5"]
    shell.run(commands(next(b for b in fifth if b.language == "sh"))[0])
    spec = clone / "mine" / "run.yaml"
    added = next(b for b in fifth if b.language == "yaml").text
    spec.write_text(spec.read_text().replace("seed: 0\n", "seed: 0\n" + added, 1))
    check, run = commands([b for b in fifth if b.language == "sh"][1])
    promised = check.split("#", 1)[1].strip()
    assert shell.run(check).strip() == promised
    ended = summary(shell.run(run))
    assert ended["terminal reason"] == "finish_called"
    assert float(ended["assessment score"]) > 400 and float(ended["starting Program on the same Episodes"]) > 400, ended
