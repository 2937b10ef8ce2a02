"""The task instructions an agent reads (TASK.md in its workspace, and the Host API's task call)."""

from __future__ import annotations

import json

from epg_sdk.readme import agent_section
from orchestrator.kernel.ports import BenchmarkInfo
from orchestrator.kernel.session import Budget
from orchestrator.run.skills import MOUNT_ROOT as SKILLS_DIR

AGENT_CANDIDATES = (
    "finally hand back your best Submissions as candidates. The Host then picks one\n"
    "candidate on private Validation Episodes and measures it on held-out Episodes."
)
ALL_COMPLETED_CANDIDATES = (
    "keep improving while the budget lasts. Every completed Submission is then\n"
    "scored on the same private Validation Episodes; the best is selected (ties go\n"
    "to the latest Submission) and measured on held-out Episodes."
)


def render_instructions(benchmark: BenchmarkInfo, budget: Budget, *, all_completed_are_candidates: bool = False,
                        skills: list[str] | None = None, mcp_tools: bool = False) -> str:
    """Return the Markdown instructions of a Run: rules, budget, selector grammar, public spec, README.

    Of the Benchmark's README only the agent's part reaches the instructions (the blocks between
    `<!-- agent:begin -->` and `<!-- agent:end -->`, or the whole README when it has no marker:
    epg_sdk.readme.agent_section). The SDK's package_readme already cuts it; cutting again here
    keeps the rule for a Benchmark that sets its readme by other means.
    all_completed_are_candidates: the Run validates every completed Submission (the spec's
    validation.candidates: all_completed) rather than the candidates the agent names.
    skills: the names of the Run's agent skills (`agent.skills`), listed with where they are mounted.
    mcp_tools: the agent's CLI has the Host API's MCP server (`orchestrator.hostclient.mcp_server`): the tools are
    described, and `epg-session` named as their shell equivalent.
    Raises epg_sdk.readme.ReadmeMarkerError for a README whose agent markers are malformed.
    """
    readme = agent_section(benchmark.readme).strip()
    per_submission = budget.max_episodes_per_submission or "no limit beyond the Episodes left"
    finish_rule = (
        "You may finish whenever you like."
        if str(budget.finish_policy) == "allow_early"
        else "You may finish only once the budget is exhausted (no Episode or no Submission left)."
    )
    spec = json.dumps(benchmark.public_json(), indent=2)
    candidates = ALL_COMPLETED_CANDIDATES if all_completed_are_candidates else AGENT_CANDIDATES
    return _skills_section(skills or []) + f"""# Task: improve a policy for {benchmark.id}

{benchmark.description}

Edit the Program in `program/` (entry point `program/policy.py`), submit it for
evaluation on Episodes of a hidden train pool, read the Feedback, improve, and
{candidates}
Only that final measurement counts.

## The Program

`policy.py` defines `make_policy(context)` returning an object with
`act(observation)`. One instance per Episode; state may persist across `act()`
calls of one Episode. `context` has `observation_space`, `action_space`,
`parameters`, `seed`, `rng` (a NumPy Generator), `benchmark_id` and
`program_dir`. Observations are NumPy arrays; return an int, float, list or
array. Only the Python standard library and NumPy are available; the simulator
is not. `print()` is harmless and its tail is shown in the Feedback.
Each Episode runs in a fresh container with a per-step deadline.

## Budget

| | |
|---|---|
| Episodes | {budget.episodes} in all (every selected index costs one, a repeated index too) |
| Submissions | at most {budget.max_submissions} |
| Episode pool | indices 0 to {budget.pool_size - 1} |
| Episodes per Submission | {per_submission} |
| Candidates at the end | at most {budget.max_candidates} |

Reusing an index replays the same hidden Episode (a paired comparison) but
still costs an Episode. A rejected request (bad selector, invalid Program,
budget exceeded) costs nothing. {finish_rule}

{_MCP_TOOLS if mcp_tools else _COMMANDS}
## Feedback

Each Submission's Feedback is published read-only in
`feedback/<submission id>/feedback.json` (and `artifacts/`): the score (the
{benchmark.primary_metric}, to {benchmark.direction}), the Benchmark's values,
and per Episode its status, failure code and reason (`exception`, `timeout`,
`invalid_action`, `protocol_violation`, `out_of_memory`, `crashed`), steps,
reward, the tail of your output and the traceback of a crash. A failed
Episode counts {benchmark.failure_return}.

Use `analysis/` for your own notes and scripts.

## Public spec

```json
{spec}
```

## The benchmark's README

{readme or "(none)"}
"""


_COMMANDS = """## Commands (`epg-session`, prints JSON)

- `epg-session status`: budget left, pool size, your Submissions and their scores.
- `epg-session submit --episodes SELECTOR`: evaluate `program/` as it is now.
  SELECTOR is a comma-separated list of indices and half-open ranges, strictly
  increasing: `0:8,12,20:24` means 0 to 7, 12, and 20 to 23.
- `epg-session finish ID [ID...]`: hand back candidate Submission ids (best first) and end your turn.
"""
_MCP_TOOLS = """## Tools (the MCP server `epg`)

- `status`: budget left, pool size, your Submissions and their scores.
- `submit` with `episodes` (a SELECTOR) or `count` (N, the same as `0:N`): evaluate
  `program/` as it is now; returns the receipt (Submission id, score, what is left).
  SELECTOR is a comma-separated list of indices and half-open ranges, strictly
  increasing: `0:8,12,20:24` means 0 to 7, 12, and 20 to 23.
- `feedback` with `submission_id`: that Submission's Feedback (below).
- `finish` with `ids`: hand back candidate Submission ids (best first) and end your turn.

A refused call is a tool error `{"error": {"code": ..., "message": ...}}`. The shell
command `epg-session` does the same: `epg-session status`, `epg-session submit
--episodes SELECTOR`, `epg-session finish ID [ID...]` (it prints JSON).
"""


def _skills_section(names: list[str]) -> str:
    """The task text's list of agent skills (none: nothing), placed first so that it is read before anything else."""
    if not names:
        return ""
    listed = "\n".join(f"- `{SKILLS_DIR}/{name}/SKILL.md`" for name in names)
    return f"""# Agent skills

This Run provides these agent skills, read-only:

{listed}

Read each SKILL.md completely before you look at the Program or submit; a skill
may refer to other files in its own directory. The rules, budget and spec below
stay authoritative. Where a skill runs `evopolicygym-session` (EvoPolicyGym
0.3's command), it works here: `evopolicygym-session submit program --episodes
SELECTOR` and `evopolicygym-session finish ID [ID...]` do what `epg-session`
does, with EvoPolicyGym's outputs, and each Submission's Feedback is then also
at `feedback/latest.json` and `feedback/submissions/<id>/feedback.json` in
EvoPolicyGym's form.

"""
