"""The hill-climb agent: a real, non-LLM baseline that tunes the numbers in program/params.json.

Every Submission evaluates the same pool indices 0..K-1 (a paired
comparison). The first Submission is the starting Program as it is; each next
one perturbs the best parameters so far with Gaussian noise whose scale grows
after an improvement and shrinks after a failure. Its state lives in
analysis/hill-climb.json, so a restarted agent carries on where it stopped.
At the end it finishes with its best Submissions.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from pathlib import Path
from typing import Any

from orchestrator.hostclient.client import HostApiError, SessionClient, finish_and_report

GROW, SHRINK, MIN_STEP, MAX_STEP = 1.5, 0.8, 1e-3, 10.0


def perturb(value: Any, step: float, rng: random.Random) -> Any:
    """Return value with every number (bools excepted) moved by N(0, step^2)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return float(value) + rng.gauss(0.0, step)
    if isinstance(value, list):
        return [perturb(item, step, rng) for item in value]
    if isinstance(value, dict):
        return {key: perturb(item, step, rng) for key, item in value.items()}
    return value


def _better(a: float, b: float, maximize: bool) -> bool:
    return a > b if maximize else a < b


def _save(path: Path, state: dict[str, Any]) -> None:
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(state, indent=2))
    os.replace(temporary, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="epg-hill-climb")
    parser.add_argument("--workspace", type=Path, default=Path("/workspace"))
    parser.add_argument("--episodes-per-submission", type=int, default=8)
    parser.add_argument("--step-size", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--candidates", type=int, default=3)
    args = parser.parse_args(argv)

    params_path = args.workspace / "program" / "params.json"
    state_path = args.workspace / "analysis" / "hill-climb.json"
    client = SessionClient()
    maximize = client.task()["public_spec"].get("direction", "maximize") == "maximize"
    if state_path.exists():
        state = json.loads(state_path.read_text())
    else:
        initial = json.loads(params_path.read_text())
        state = {"initial": initial, "best": None, "step": args.step_size, "history": []}
    known = {s["id"] for s in client.status()["submissions"] if s["state"] == "completed"}
    state["history"] = [h for h in state["history"] if h["id"] in known]

    while True:
        status = client.status()
        count = min(args.episodes_per_submission, status["pool_size"], status["episodes_left"])
        limit = status["max_episodes_per_submission"] or count
        count = min(count, limit)
        if status["submissions_left"] == 0 or count == 0:
            break
        rng = random.Random(f"{args.seed}:{len(state['history'])}")
        best = state["best"]
        params = state["initial"] if best is None else perturb(best["params"], state["step"], rng)
        params_path.write_text(json.dumps(params, indent=2))
        try:
            receipt = client.submit(f"0:{count}")
        except HostApiError as exc:
            print(f"submit refused: {exc}", flush=True)
            break
        entry = {"id": receipt["submission_id"], "score": receipt["score"], "params": params}
        state["history"].append(entry)
        if best is None or _better(entry["score"], best["score"], maximize):
            if best is not None:
                state["step"] = min(MAX_STEP, state["step"] * GROW)
            state["best"] = entry
        else:
            state["step"] = max(MIN_STEP, state["step"] * SHRINK)
        _save(state_path, state)
        print(f"{entry['id']}: score {entry['score']:.3f} (best {state['best']['score']:.3f}, step {state['step']:.3f})", flush=True)

    if state["best"] is not None:
        params_path.write_text(json.dumps(state["best"]["params"], indent=2))
    ranked = sorted(
        enumerate(state["history"]), key=lambda item: ((-1 if maximize else 1) * item[1]["score"], -item[0])
    )
    candidates = [entry["id"] for _, entry in ranked[: args.candidates]]
    if not candidates:
        return 0
    return finish_and_report(client, candidates)


if __name__ == "__main__":
    sys.exit(main())
