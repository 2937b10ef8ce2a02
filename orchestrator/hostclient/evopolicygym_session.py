"""`evopolicygym-session`: EvoPolicyGym 0.3's agent-side command, with its arguments and outputs, on our Host API.

    evopolicygym-session submit program --episodes "0:2,4:8"
    evopolicygym-session finish ID [ID ...]
    evopolicygym-session --version

As theirs: a success prints one compact JSON object (sorted keys) on stdout,
`{"ok": true, "protocol": "agent-session/v3", "result": {...}}`, and exits 0; a
refusal by the Host prints `{"ok": false, "protocol": ..., "error": {"code", "message"}}`
on stderr and exits 1; a fault of the command itself (no Host to reach, a
program that is not the workspace's) prints `{"ok": false, "error": {"code":
"client_error", ...}}` on stderr and exits 2, and so does a selector argparse refuses.

The selector is theirs: items `N` or `START:END` (half-open), comma separated,
unsigned decimal, no whitespace, strictly increasing across the whole selector,
at most 2048 indices. It is checked here and sent to the Host as our selector
of the same indices, runs merged into ranges (`0,1,2,5` -> `0:3,5`); our Host
then checks the pool and the budget. After a successful submit their Feedback
view is written (`hostclient.feedback_view`): `feedback/latest.json` and
`feedback/submissions/<id>/`.

Their error codes from ours: invalid_selector, index_out_of_range,
malformed_request, unknown_method and no_candidates -> invalid_request;
too_many_episodes -> episode_limit; submissions_exhausted -> submission_limit;
invalid_program -> program_invalid; duplicate_candidate -> duplicate_submission;
too_many_candidates -> candidate_limit; finish_not_allowed -> budget_remaining;
already_finished -> session_closed; budget_exhausted, unknown_submission and
session_closed are the same. busy, unauthenticated, request_too_large and
internal have no counterpart and are given as ours.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from epg.v1 import host_api_pb2 as pb
from orchestrator.hostclient.client import HostApiError, SessionClient
from orchestrator.hostclient.feedback_view import publish_view, submission_documents

PROTOCOL = "agent-session/v3"
VERSION = "0.3.0"
MAX_INDICES = 2048
MAX_INDEX = 2**64 - 1
_UNSIGNED = re.compile(r"[0-9]+")
# Our Host API codes (the proto's ErrorCode names) and theirs; a code not listed is given as ours.
THEIR_CODES = {
    "invalid_selector": "invalid_request",
    "index_out_of_range": "invalid_request",
    "malformed_request": "invalid_request",
    "unknown_method": "invalid_request",
    "no_candidates": "invalid_request",
    "too_many_episodes": "episode_limit",
    "submissions_exhausted": "submission_limit",
    "invalid_program": "program_invalid",
    "duplicate_candidate": "duplicate_submission",
    "too_many_candidates": "candidate_limit",
    "finish_not_allowed": "budget_remaining",
    "already_finished": "session_closed",
}
HOST_CODES = frozenset(name.removeprefix("ERROR_CODE_").lower() for name in pb.ErrorCode.keys()) - {"unspecified"}


class ClientError(Exception):
    """A fault of the command, not a refusal by the Host: exit 2."""


def parse_episodes(text: str) -> tuple[int, ...]:
    """The indices their selector text names, strictly increasing. Raises ValueError saying what is wrong."""
    if not text or any(character.isspace() for character in text):
        raise ValueError("Episode selector must not be empty or contain whitespace")
    indices: list[int] = []
    for item in text.split(","):
        if not item:
            raise ValueError("Episode selector contains an empty item")
        parts = item.split(":")
        if len(parts) > 2:
            raise ValueError("Episode ranges must use START:END")
        start = _unsigned(parts[0], MAX_INDEX)
        end = _unsigned(parts[1], MAX_INDEX + 1) if len(parts) == 2 else start + 1
        if start >= end:
            raise ValueError("Episode ranges must be non-empty and increasing")
        if indices and start <= indices[-1]:
            raise ValueError("Episode selector must be strictly increasing without overlap")
        if end - start > MAX_INDICES - len(indices):
            raise ValueError(f"Episode selector contains too many indices (at most {MAX_INDICES})")
        indices.extend(range(start, end))
    return tuple(indices)


def _unsigned(text: str, limit: int) -> int:
    if _UNSIGNED.fullmatch(text) is None:
        raise ValueError("Episode indices must use unsigned decimal integers")
    if len(text.lstrip("0")) > 20 or int(text) > limit:
        raise ValueError("Episode index exceeds the unsigned 64-bit range")
    return int(text)


def our_selector(indices: tuple[int, ...]) -> str:
    """Our Host API selector of the same indices: runs of two or more as half-open ranges (0,1,2,5 -> "0:3,5")."""
    parts: list[str] = []
    start = 0
    for position in range(1, len(indices) + 1):
        if position == len(indices) or indices[position] != indices[position - 1] + 1:
            first, last = indices[start], indices[position - 1]
            parts.append(str(first) if first == last else f"{first}:{last + 1}")
            start = position
    return ",".join(parts)


def _selector_argument(text: str) -> tuple[int, ...]:
    try:
        return parse_episodes(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="evopolicygym-session",
                                     description="EvoPolicyGym's Session command, served by this Run's Host API.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {VERSION}")
    commands = parser.add_subparsers(dest="command", required=True)
    submit = commands.add_parser("submit", help="evaluate the workspace's program/ directory")
    submit.add_argument("program", help="must be the workspace's program/ directory")
    submit.add_argument("--episodes", type=_selector_argument, required=True, metavar="SELECTOR",
                        help='Run-local Episode indices, for example "0:2,4:8"')
    finish = commands.add_parser("finish", help="finish search with one or more published candidates")
    finish.add_argument("submission_ids", nargs="+")
    return parser


def workspace() -> Path:
    """The agent's workspace: $EVOPOLICYGYM_WORKSPACE, else $EPG_WORKSPACE, else the working directory."""
    return Path(os.environ.get("EVOPOLICYGYM_WORKSPACE") or os.environ.get("EPG_WORKSPACE") or os.getcwd())


def submit(client: SessionClient, program: str, indices: tuple[int, ...], root: Path) -> dict[str, Any]:
    """Submit root/program on indices and write their Feedback view; return their result object.

    Raises ClientError when program is not root/program, HostApiError when the Host refuses, and HostApiError
    with code publication_failed when the view cannot be written (the Submission was made and spent).
    """
    try:
        if Path(program).resolve(strict=True) != (root / "program").resolve(strict=True):
            raise ClientError("submitted Program must be workspace/program")
    except OSError as exc:
        raise ClientError(f"cannot resolve the Program directory: {exc.strerror}") from None
    receipt = client.submit(our_selector(indices))
    submission_id = receipt["submission_id"]
    published = root / receipt["feedback_path"]
    try:
        ours = json.loads(published.read_bytes())
        feedback, availability, latest = submission_documents(receipt, indices, ours, published.parent)
        publish_view(root, submission_id, feedback, availability, latest)
    except (OSError, ValueError) as exc:
        raise HostApiError(code="publication_failed",
                           message=f"{submission_id} was evaluated and its Episodes spent, but its Feedback view could not be "
                                   f"written ({exc}); our Feedback is at {receipt['feedback_path']}") from None
    return {
        "submission_id": submission_id,
        "program_digest": receipt["program_digest"],
        "score": receipt["score"],
        "episode_indices": list(indices),
        "episodes_used": len(indices),
        "episodes_remaining": receipt["episodes_left"],
        "feedback": f"feedback/submissions/{submission_id}/feedback.json",
    }


def finish(client: SessionClient, submission_ids: list[str]) -> dict[str, Any]:
    """Hand the candidates back; return their result object. Raises HostApiError."""
    receipt = client.finish(submission_ids)
    return {"candidate_submission_ids": list(receipt["candidates"]), "agent_authority_closed": True}


def _print(document: dict[str, Any], stream: Any) -> None:
    print(json.dumps(document, allow_nan=False, ensure_ascii=False, separators=(",", ":"), sort_keys=True), file=stream)


def main(argv: list[str] | None = None) -> int:
    """Run the command; return its exit status (0 done, 1 refused by the Host, 2 a fault of the command)."""
    args = _parser().parse_args(argv)
    try:
        client = SessionClient()
    except Exception as exc:  # grpc refuses a malformed target
        _print({"ok": False, "error": {"code": "client_error", "message": str(exc)}}, sys.stderr)
        return 2
    try:
        if args.command == "submit":
            result = submit(client, args.program, args.episodes, workspace())
        else:
            result = finish(client, args.submission_ids)
    except ClientError as exc:
        _print({"ok": False, "error": {"code": "client_error", "message": str(exc)}}, sys.stderr)
        return 2
    except HostApiError as exc:
        if exc.code not in HOST_CODES and exc.code != "publication_failed":  # never reached the Host
            _print({"ok": False, "error": {"code": "client_error", "message": f"{exc.code}: {exc.message}"}}, sys.stderr)
            return 2
        _print({"protocol": PROTOCOL, "ok": False, "error": {"code": THEIR_CODES.get(exc.code, exc.code), "message": exc.message}},
               sys.stderr)
        return 1
    finally:
        client.close()
    _print({"protocol": PROTOCOL, "ok": True, "result": result}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
