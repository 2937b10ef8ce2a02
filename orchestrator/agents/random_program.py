"""The random agent: submits the Benchmark's uniform-random Program, the reference row of the published tables.

The Host copies the environment package's `random/` Program (public code, like
its baseline) into the agent's read-only plan directory; this agent, inside the
agent container like any other, puts it into program/, submits it through the
Host API and finishes with it. Its score on the train pool is not what a table
reports: the Host validates and assesses it like any candidate. Under
`finish: require_exhaustion` it spends the whole budget on that Program in as
few Submissions as the budget allows. A restarted agent counts
the Submissions already completed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from orchestrator.agents.scripted import replace_program
from orchestrator.hostclient.client import HostApiError, SessionClient, finish_and_report


def next_count(status: dict[str, Any], per_submission: int) -> int:
    """How many pool indices the next Submission selects (0: none can be paid for)."""
    count = min(per_submission, int(status["pool_size"]), int(status["episodes_left"]))
    limit = int(status["max_episodes_per_submission"]) or count
    return min(count, limit) if int(status["submissions_left"]) > 0 else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="epg-random-agent")
    parser.add_argument("--program", type=Path, required=True, help="The uniform-random Program (read-only).")
    parser.add_argument("--workspace", type=Path, default=Path("/workspace"))
    parser.add_argument("--episodes-per-submission", type=int, default=1)
    args = parser.parse_args(argv)
    client = SessionClient()
    replace_program(args.program, args.workspace / "program")
    while True:
        status = client.status()
        completed = [s["id"] for s in status["submissions"] if s["state"] == "completed"]
        if status["finished"]:
            return 0
        if completed and status["finish_policy"] != "require_exhaustion":
            break
        exhaust = status["finish_policy"] == "require_exhaustion"
        count = next_count(status, int(status["episodes_left"]) if exhaust else args.episodes_per_submission)
        if count == 0:
            break
        try:
            receipt = client.submit(f"0:{count}")
        except HostApiError as exc:
            print(f"submit refused: {exc}", flush=True)
            break
        print(f"{receipt['submission_id']}: score {receipt['score']:.3f}, {receipt['episodes_left']} Episodes left", flush=True)
    if not completed:
        return 0
    # Every Submission holds the same Program: the latest ones stand for it.
    return finish_and_report(client, completed[::-1][: int(status["max_candidates"])])


if __name__ == "__main__":
    sys.exit(main())
