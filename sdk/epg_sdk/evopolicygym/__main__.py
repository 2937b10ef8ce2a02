"""`python -m epg_sdk.evopolicygym discover MODULE`: print the Benchmarks an EvoPolicyGym package exports as JSON.

Prints a JSON list of {"id", "entry", "class", "profile"} on stdout and what
could not be constructed on stderr; exits 1 when the package exports none.
"""

from __future__ import annotations

import argparse
import json
import sys

from epg_sdk.evopolicygym.discovery import discover


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m epg_sdk.evopolicygym", description=__doc__.splitlines()[0] if __doc__ else None)
    commands = parser.add_subparsers(dest="command", required=True)
    command = commands.add_parser("discover", help="list the Benchmarks a package exports, with their entries")
    command.add_argument("module", help="the package's import name, for example minigrid_doorkey")
    args = parser.parse_args(argv)
    problems: list[str] = []
    found = discover(args.module, problems)
    print(json.dumps(found))  # one line, the last: what a package prints while imported comes before it
    for problem in problems:
        print(f"not constructed: {problem}", file=sys.stderr)
    return 0 if found else 1


if __name__ == "__main__":
    sys.exit(main())
