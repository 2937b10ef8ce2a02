"""`epg-session status | task | submit --episodes SELECTOR | finish ID...`: prints one JSON object.

Exit status 0 on success; 1 with {"error": {"code", "message"}} when the Host
refuses; 2 for a usage error.
"""

from __future__ import annotations

import argparse
import json
import sys

from orchestrator.hostclient.client import HostApiError, SessionClient


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="epg-session", description="Talk to the Host of this Run.")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("status", help="budget left, pool size, Submissions so far")
    commands.add_parser("task", help="the task instructions and the public spec")
    submit = commands.add_parser("submit", help="evaluate workspace/program on pool indices")
    submit.add_argument("--episodes", required=True, help="index selector, e.g. 0:8,12,20:24")
    finish = commands.add_parser("finish", help="hand back candidate Submission ids and end the turn")
    finish.add_argument("ids", nargs="+")
    args = parser.parse_args(argv)

    client = SessionClient()
    try:
        if args.command == "status":
            result = client.status()
        elif args.command == "task":
            result = client.task()
        elif args.command == "submit":
            result = client.submit(args.episodes)
        else:
            result = client.finish(args.ids)
    except HostApiError as exc:
        print(json.dumps({"error": {"code": exc.code, "message": exc.message}}))
        return 1
    finally:
        client.close()
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
