"""A real Run whose agent follows agent skills through `evopolicygym-session`: the skills stored, recorded and mounted
read-only, the agent's submit answered in EvoPolicyGym's form with `feedback/latest.json`, the Run finished.

One skill is written here (CI always has it): its SKILL.md holds the shell commands the agent runs, one by one, as
written. The other is EvoPolicyGym 0.3's own `optimize-balatro-policy`, copied at test time from a checkout
($EPG_EVOPOLICYGYM_CHECKOUT) or the mirror of its repository; its evidence script reads our Submission's Feedback
in their form. Its test is skipped when neither is here.
"""

from __future__ import annotations

import errno
import io
import json
import os
import subprocess
import tarfile
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.cli import run_cli

from orchestrator.kernel.program import capture_program
from orchestrator.run.skills import read_skill

REPO = Path(__file__).resolve().parents[2]
BASELINE = REPO / "environments" / "cartpole" / "baseline"
MIRROR = Path("/work/.mirror/Linzwcs+EvoPolicyGym/repo")
THEIR_SKILL = "optimize-balatro-policy"

OUR_SKILL = """---
name: tune-cartpole
description: Evaluate the CartPole Program through the Session command and hand it back.
---

# Tune CartPole

Run these commands from the workspace root, in order:

```sh
evopolicygym-session submit program --episodes "0:2,4:6" > analysis/submit.json
cp feedback/latest.json analysis/latest.json
python3 /epg/skills/tune-cartpole/scripts/mean_reward.py feedback/latest.json > analysis/mean.json
evopolicygym-session finish "$(python3 -c 'import json; print(json.load(open("feedback/latest.json"))["submission_id"])')" > analysis/finish.json
```
"""
MEAN_REWARD = """import json, os, sys
latest = json.load(open(sys.argv[1]))
feedback = json.load(open(os.path.join(os.path.dirname(sys.argv[1]), latest["feedback"])))
rewards = [episode["reward"] for episode in feedback["episodes"]]
json.dump({"indices": [e["episode_index"] for e in feedback["episodes"]], "mean": sum(rewards) / len(rewards)}, sys.stdout)
"""

# The agent: reads every mounted skill, tries to write into one, runs the shell block of tune-cartpole's SKILL.md line by
# line, and (when it is mounted) runs EvoPolicyGym's evidence script on the Feedback in their form.
AGENT = r'''
import json, os, re, subprocess
facts = {"skills": sorted(os.listdir("/epg/skills")), "environment": os.environ.get("EPG_SKILLS")}
facts["mounts"] = {f[1]: f[3].split(",")[0] for f in (line.split() for line in open("/proc/self/mounts")) if f[1].startswith("/epg/skills/")}
text = open("/epg/skills/tune-cartpole/SKILL.md").read()
for attempt, path in (("append", "/epg/skills/tune-cartpole/SKILL.md"), ("create", "/epg/skills/tune-cartpole/new.md")):
    try:
        open(path, "a").write("changed by the agent")
        facts[attempt] = "written"
    except OSError as exc:
        facts[attempt] = exc.errno
commands = re.search(r"```sh\n(.*?)```", text, re.S).group(1).strip().splitlines()
facts["commands"] = [subprocess.run(["sh", "-c", line]).returncode for line in commands]
script = "/epg/skills/optimize-balatro-policy/scripts/summarize_evidence.py"
if os.path.exists(script):
    latest = json.load(open("feedback/latest.json"))
    done = subprocess.run(["python3", script, "feedback/" + latest["feedback"]], capture_output=True, text=True)
    facts["their_summary"] = {"code": done.returncode, "stdout": done.stdout, "stderr": done.stderr[-2000:]}
json.dump(facts, open("analysis/facts.json", "w"))
'''


def their_skill(target: Path) -> Path | None:
    """EvoPolicyGym's optimize-balatro-policy skill copied below target, from a checkout or the mirror; None if neither."""
    checkout = os.environ.get("EPG_EVOPOLICYGYM_CHECKOUT")
    if checkout and (Path(checkout) / "skills" / THEIR_SKILL / "SKILL.md").is_file():
        subprocess.run(["cp", "-r", str(Path(checkout) / "skills" / THEIR_SKILL), str(target)], check=True)
        return target / THEIR_SKILL
    if not MIRROR.is_dir():
        return None
    archive = subprocess.run(["git", "-C", str(MIRROR), "archive", "HEAD", f"skills/{THEIR_SKILL}"], capture_output=True, check=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(target, filter="data")
    return target / "skills" / THEIR_SKILL


@pytest.fixture(scope="module")
def skills_run(tmp_path_factory: pytest.TempPathFactory, scope: str) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("skills-run")
    ours = root / "skills" / "tune-cartpole"
    (ours / "scripts").mkdir(parents=True)
    (ours / "SKILL.md").write_text(OUR_SKILL)
    (ours / "scripts" / "mean_reward.py").write_text(MEAN_REWARD)
    theirs = their_skill(root / "reference")
    skills = [str(ours)] + ([str(theirs)] if theirs else [])
    spec = root / "spec.yaml"
    spec.write_text(yaml.safe_dump({
        "benchmark": "CartPole-v1",
        "budget": {"episodes": 8, "max_submissions": 4, "pool_size": 8},
        "validation": {"episodes": 2, "max_candidates": 1},
        "assessment": {"episodes": 2},
        "agent": {"kind": "command", "image": "agent-base", "argv": ["python3", "-c", AGENT], "skills": skills},
    }))
    run_dir = root / "run"
    result = run_cli("run", str(spec), "-o", str(run_dir), "--json", scope=scope)
    assert result.exit_code == 0, result.stderr
    analysis = run_dir / "workspace" / "analysis"
    return {"manifest": json.loads(result.stdout), "run_dir": run_dir, "analysis": analysis, "ours": ours, "theirs": theirs,
            "facts": json.loads((analysis / "facts.json").read_text())}


def test_an_agent_following_a_skill_through_evopolicygym_session_finishes_the_run_with_its_submission(skills_run: dict[str, Any]):
    manifest, analysis, facts = skills_run["manifest"], skills_run["analysis"], skills_run["facts"]
    digest = capture_program(BASELINE).digest

    assert facts["commands"] == [0, 0, 0, 0]
    assert manifest["terminal_reason"] == "finish_called"
    assert manifest["final"] == {"submission_id": "s0001", "program_digest": digest, "is_initial_program": True}  # the baseline, unchanged
    submit = json.loads((analysis / "submit.json").read_text())
    assert (submit["protocol"], submit["ok"]) == ("agent-session/v3", True)
    result = submit["result"]
    assert (result["submission_id"], result["program_digest"], result["episode_indices"]) == ("s0001", digest, [0, 1, 4, 5])
    assert (result["episodes_used"], result["episodes_remaining"]) == (4, 4)
    assert result["feedback"] == "feedback/submissions/s0001/feedback.json"
    latest = json.loads((analysis / "latest.json").read_text())
    assert latest == {"schema": "evopolicygym/feedback/v2", "submission_id": "s0001", "program_digest": digest,
                      "score": result["score"], "feedback": "submissions/s0001/feedback.json"}
    ours = json.loads((skills_run["run_dir"] / "submissions" / "s0001" / "record.json").read_text())["feedback"]
    mean = json.loads((analysis / "mean.json").read_text())
    assert mean == {"indices": [0, 1, 4, 5], "mean": pytest.approx(sum(e["reward"] for e in ours["episodes"]) / 4)}
    assert json.loads((analysis / "finish.json").read_text())["result"] == {"candidate_submission_ids": ["s0001"],
                                                                            "agent_authority_closed": True}


def test_the_skills_are_stored_recorded_listed_and_read_only_to_the_agent(skills_run: dict[str, Any]):
    manifest, run_dir, facts = skills_run["manifest"], skills_run["run_dir"], skills_run["facts"]
    expected = [("tune-cartpole", read_skill(skills_run["ours"])[0])]
    if skills_run["theirs"] is not None:
        expected.append((THEIR_SKILL, read_skill(skills_run["theirs"])[0]))

    assert [(s["name"], s["digest"]) for s in manifest["skills"]] == expected
    invocation = json.loads((run_dir / "agent" / "invocation.json").read_text())
    assert [(s["name"], s["digest"]) for s in invocation["skills"]] == expected
    for name, digest in expected:
        assert (run_dir / "skills" / digest.removeprefix("sha256:") / "SKILL.md").is_file()
        assert f"/epg/skills/{name}/SKILL.md" in (run_dir / "task.md").read_text()
    stored = run_dir / "skills" / expected[0][1].removeprefix("sha256:") / "SKILL.md"
    assert stored.read_text() == OUR_SKILL  # the agent's attempt left it as it was
    assert facts["skills"] == sorted(name for name, _ in expected) and facts["environment"] == "/epg/skills"
    assert facts["mounts"] == {f"/epg/skills/{name}": "ro" for name, _ in expected}
    assert facts["append"] in (errno.EACCES, errno.EROFS) and facts["create"] in (errno.EACCES, errno.EROFS)


def test_evopolicygyms_own_skill_reads_our_feedback_in_their_form(skills_run: dict[str, Any]):
    if skills_run["theirs"] is None:
        pytest.skip("no EvoPolicyGym checkout ($EPG_EVOPOLICYGYM_CHECKOUT) or mirror to copy its skill from")
    summary = skills_run["facts"]["their_summary"]

    assert summary["code"] == 0, summary["stderr"]
    evidence = json.loads(summary["stdout"])
    assert (evidence["episodes"], evidence["policy_failures"]) == (4, 0)
    assert evidence["program_digests"] == [capture_program(BASELINE).digest]


# A real coding-agent CLI against the fake provider ----------------------------------------------------------------------
def test_claude_code_finds_the_skills_where_it_looks_and_runs_them_through_evopolicygym_session(tmp_path: Path, scope: str,
                                                                                               builder: Any):
    from cli_runs import _fake_provider_module, run_cli_agent, tool_outputs

    ours = tmp_path / "skills" / "tune-cartpole"
    (ours / "scripts").mkdir(parents=True)
    (ours / "SKILL.md").write_text(OUR_SKILL)
    (ours / "scripts" / "mean_reward.py").write_text(MEAN_REWARD)
    theirs = their_skill(tmp_path / "reference")
    home_skill = "$HOME/.claude/skills"
    turns = [
        {"shell": f"head -3 {home_skill}/tune-cartpole/SKILL.md", "text": "Reading the skill."},
        {"shell": 'evopolicygym-session submit program --episodes "0:2,4:6" > analysis/submit.json; cat analysis/submit.json'},
        {"shell": f"python3 {home_skill}/tune-cartpole/scripts/mean_reward.py feedback/latest.json > analysis/mean.json"},
        *([{"shell": f"python3 {home_skill}/{THEIR_SKILL}/scripts/summarize_evidence.py feedback/submissions/s0001/feedback.json"
                     " > analysis/their_summary.json"}] if theirs else []),
        {"shell": "evopolicygym-session finish s0001 > analysis/finish.json"},
        {"text": "Finished."},
    ]
    fake = _fake_provider_module()
    log = tmp_path / "provider.jsonl"
    server = fake.Server(0, fake.Script(turns), fake.JsonlLog(str(log)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        agent = {"kind": "claude-code", "model": "fake-model", "effort": "low", "skills": [str(ours)] + ([str(theirs)] if theirs else [])}
        manifest, run_dir = run_cli_agent(agent, f"http://127.0.0.1:{server.server_address[1]}", tmp_path, scope)
    finally:
        server.shutdown()
        server.server_close()

    analysis = run_dir / "workspace" / "analysis"
    assert manifest["terminal_reason"] == "finish_called", (run_dir / "agent" / "stdout.log").read_text()[-3000:]
    assert manifest["final"]["submission_id"] == "s0001"
    assert json.loads((analysis / "submit.json").read_text())["result"]["episode_indices"] == [0, 1, 4, 5]
    assert json.loads((analysis / "mean.json").read_text())["indices"] == [0, 1, 4, 5]
    assert json.loads((analysis / "finish.json").read_text())["result"]["candidate_submission_ids"] == ["s0001"]
    if theirs:
        evidence = json.loads((analysis / "their_summary.json").read_text())
        assert (evidence["episodes"], evidence["program_digests"]) == (4, [manifest["final"]["program_digest"]])
    requests = [json.loads(line) for line in log.read_text().splitlines()]
    sent_back = [o for r in requests if r["dir"] == "request" and isinstance(r["body"], dict) for o in tool_outputs(r["body"])]
    assert any("name: tune-cartpole" in output for output in sent_back), sent_back  # read through the CLI's skills directory
