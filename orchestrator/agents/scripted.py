"""The scripted agent: replays a fixed list of Program directories as Submissions, then finishes.

Plan file (JSON): {"steps": [{"program": DIR, "episodes": SELECTOR}, ...],
"finish": "all" | "none" | [submission ids]}. On a restart it skips the steps
whose Submissions already completed, so a resumed Run does not repeat them.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from orchestrator.hostclient.client import HostApiError, SessionClient, finish_and_report


def replace_program(source: Path, workspace_program: Path) -> None:
    """Make workspace_program hold exactly the files of source."""
    for child in workspace_program.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()
    shutil.copytree(source, workspace_program, dirs_exist_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="epg-scripted-agent")
    parser.add_argument("plan", type=Path)
    parser.add_argument("--workspace", type=Path, default=Path("/workspace"))
    args = parser.parse_args(argv)
    plan = json.loads(args.plan.read_text())
    client = SessionClient()
    status = client.status()
    done = [s for s in status["submissions"] if s["state"] == "completed"]
    for step in plan["steps"][len(done):]:
        replace_program(args.plan.parent / step["program"], args.workspace / "program")
        try:
            receipt = client.submit(step["episodes"])
        except HostApiError as exc:
            print(f"submit refused: {exc}", flush=True)
            continue
        print(f"{receipt['submission_id']}: score {receipt['score']:.3f}, {receipt['episodes_left']} Episodes left", flush=True)
    finish = plan.get("finish", "all")
    if finish == "none":
        return 0
    if finish == "all":
        status = client.status()
        finish = [s["id"] for s in status["submissions"] if s["state"] == "completed"][: status["max_candidates"]]
    return finish_and_report(client, list(finish))


if __name__ == "__main__":
    sys.exit(main())
