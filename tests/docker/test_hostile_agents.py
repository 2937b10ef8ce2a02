"""A hostile coding agent against a root Host, through real Runs: capture races, FIFOs, resume, disk, typed refusals.

The agent is a `command` agent on agent-base that uses only /workspace and the
Host API. It swaps entries of program/ and analysis/ with
renameat2(RENAME_EXCHANGE) in a forked process while it submits, with decoys
so that a lost race costs it nothing. The tests then look for the Host's
secrets in every record a Program could have reached.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml
from support.cli import CliResult, run_cli

REPO = Path(__file__).resolve().parents[2]
SWAPPER_SOURCE = (REPO / "tests" / "fakes" / "swapper.py").read_text().split('if __name__ == "__main__":')[0]
SECRET = "host-secret-" + os.urandom(8).hex()


@pytest.fixture(autouse=True)
def _as_root():
    if os.geteuid() != 0:
        pytest.fail("these tests attack a root Host and must run as root", pytrace=False)


def spec_for(tmp_path: Path, source: str, environment: dict[str, str], **extra) -> Path:
    spec = {
        "benchmark": "CartPole-v1",
        "budget": {"episodes": 3000, "max_submissions": 3000, "pool_size": 2},
        "validation": {"episodes": 1, "max_candidates": 1},
        "assessment": {"episodes": 1, "include_initial_program": False},
        "sandbox": {"pool_size": 4},
        "agent": {"kind": "command", "image": "agent-base", "argv": ["python3", "-c", source], "environment": environment},
        **extra,
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.fixture
def host_secrets(tmp_path: Path) -> dict[str, Path]:
    """A root-only file and a root-only directory on the Host, both holding SECRET."""
    vault = tmp_path / "vault"
    vault.mkdir(mode=0o700)
    (vault / "data").write_text(SECRET)
    os.chmod(vault / "data", 0o600)
    return {"file": vault / "data", "dir": vault}


def records_holding(run_dir: Path, needle: bytes) -> list[str]:
    """Every file of the run directory outside private/ whose bytes contain needle."""
    hits = []
    for directory, dirs, files in os.walk(run_dir):
        dirs[:] = [d for d in dirs if Path(directory, d) != run_dir / "private"]
        for name in files:
            path = Path(directory, name)
            if not path.is_symlink() and path.is_file() and needle in path.read_bytes():
                hits.append(str(path.relative_to(run_dir)))
    return hits


RACES = SWAPPER_SOURCE + r'''
import json, os, shutil, time
from orchestrator.hostclient.client import HostApiError, SessionClient

P, A = "/workspace/program", "/workspace/analysis"
targets = json.loads(os.environ["EPG_TEST_TARGETS"])
client = SessionClient()
DECOY_POLICY = "def make_policy(context):\n    raise RuntimeError('decoy')\n"
results, races = {}, {}
LEAST, ENOUGH = 30, 3

def write(path, text):
    with open(path, "w") as handle:
        handle.write(text)

def reset():
    for root in (P, A):
        for name in os.listdir(root):
            path = os.path.join(root, name)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
    write(P + "/policy.py", DECOY_POLICY)

def attack(name, a, b, attempts):
    # At rest the hostile entry is in program/ (a free refusal); the decoy flashes
    # in and out, so a capture that looks at the wrong moment is what is tested.
    # Up to `attempts` Submits, ending early once both outcomes came ENOUGH times after at least LEAST
    # (measured: thousands of exchanges per Submit, and 2 to 5 captures in 100 Submits, the rest refusals).
    began = time.monotonic()
    pid = os.fork()
    if pid == 0:
        exchange = exchanger()
        count = 0
        try:
            exchange(a, b)
            while not os.path.exists("/tmp/stop"):
                for _ in range(50):
                    exchange(a, b)
                    exchange(a, b)
                count += 100
                time.sleep(0.0005)
        finally:
            write("/tmp/exchanges", str(count))
            os._exit(0)
    codes = {}
    for attempt in range(1, attempts + 1):
        try:
            client.submit("0")
            code = "captured"
        except HostApiError as exc:
            code = exc.code
        codes[code] = codes.get(code, 0) + 1
        if attempt >= LEAST and min(codes.get("captured", 0), codes.get("invalid_program", 0)) >= ENOUGH:
            break  # both windows hit often enough: a capture that saw the decoy, a capture that saw the swap
    write("/tmp/stop", "")
    os.waitpid(pid, 0)
    os.unlink("/tmp/stop")
    results[name] = codes
    with open("/tmp/exchanges") as handle:
        races[name] = {"exchanges": int(handle.read()), "seconds": round(time.monotonic() - began, 2)}

for label, target in (("file", targets["file"]), ("pool", targets["pool"]), ("environ", "/proc/self/environ")):
    reset()
    write(P + "/loot", "decoy\n")
    os.symlink(target, A + "/loot")
    attack("file-swap-" + label, P + "/loot", A + "/loot", 200)

reset()
os.mkdir(P + "/sub")
write(P + "/sub/data", "decoy\n")
os.symlink(targets["dir"], A + "/sub")
attack("directory-swap", P + "/sub", A + "/sub", 200)

reset()
write(P + "/pipe", "decoy\n")
os.mkfifo(A + "/pipe")
attack("fifo-swap", P + "/pipe", A + "/pipe", 100)

def submit_once(name):
    try:
        client.submit("0")
        results[name] = "captured"
    except HostApiError as exc:
        results[name] = exc.code

reset()
with open(os.path.join(os.fsencode(P), b"bad-\xff"), "wb") as handle:
    handle.write(b"x")
submit_once("non-utf8")
reset()
os.makedirs(P + "/d" * 40)
submit_once("deep")

reset()
results["status"] = client.status()
receipt = client.submit("0")
client.finish([receipt["submission_id"]])
os.symlink("/etc/passwd", P + "/link")  # an invalid Program on a finished Run: the finish is what counts
submit_once("after-finish")
json.dump(results, open(A + "/results.json", "w"))
json.dump(races, open(A + "/races.json", "w"))
'''


def test_capture_races_never_capture_a_host_byte_and_every_refusal_is_free(tmp_path, scope, host_secrets):
    run_dir = tmp_path / "run"
    targets = {"file": str(host_secrets["file"]), "dir": str(host_secrets["dir"]), "pool": str(run_dir / "private" / "pool.json")}
    spec = spec_for(tmp_path, RACES, {"EPG_TEST_TARGETS": json.dumps(targets)})
    result = run_cli("run", str(spec), "-o", str(run_dir), "--json", scope=scope, timeout=900)
    assert result.exit_code == 0, result.stderr
    results = json.loads((run_dir / "workspace" / "analysis" / "results.json").read_text())
    races = json.loads((run_dir / "workspace" / "analysis" / "races.json").read_text())  # exchanges made, seconds taken

    for name in ("file-swap-file", "file-swap-pool", "file-swap-environ", "directory-swap", "fifo-swap"):
        codes = results[name]
        assert sum(codes.values()) >= 30 and set(codes) <= {"captured", "invalid_program"}, (name, codes)
        assert codes.get("invalid_program", 0) > 0, f"{name}: the swap never raced a capture ({codes})"
        assert codes.get("captured", 0) > 0, f"{name}: no capture ever saw the decoy ({codes})"
        # the swapper really raced every Submit: many exchanges while each was captured
        assert races[name]["exchanges"] >= 100 * sum(codes.values()), (name, races[name], codes)
    assert (results["non-utf8"], results["deep"], results["after-finish"]) == ("invalid_program", "invalid_program", "already_finished")

    # No byte of the Host's secrets, of the hidden pool or of the Host's environment in any record.
    pool_marker = json.loads((run_dir / "private" / "pool.json").read_text())[0]["payload"].encode("latin-1")
    assert records_holding(run_dir, SECRET.encode()) == []
    assert records_holding(run_dir, pool_marker) == []
    assert records_holding(run_dir / "programs", b"PATH=") == []
    # Refusals spent nothing: every Episode charged belongs to a captured Submission.
    captured = sum(codes.get("captured", 0) for name, codes in results.items() if name.endswith("swap") or "-swap-" in name)
    assert results["status"]["submissions_used"] == captured
    assert results["status"]["episodes_used"] == captured
    manifest = json.loads(result.stdout)
    assert manifest["terminal_reason"] == "finish_called"


PLANT = r'''
import json, os, time, subprocess
A = "/workspace/analysis"
if os.path.exists(A + "/planted"):
    subprocess.run(["epg-session", "submit", "--episodes", "0"], check=True, capture_output=True)
    status = json.loads(subprocess.run(["epg-session", "status"], check=True, capture_output=True, text=True).stdout)
    subprocess.run(["epg-session", "finish", status["submissions"][-1]["id"]], check=True, capture_output=True)
    raise SystemExit(0)
target = os.environ["EPG_TEST_HOST_FILE"]
os.symlink(target, A + "/to-host-file")
os.symlink(os.path.dirname(target), A + "/to-host-dir")
os.symlink("/nowhere/at/all", A + "/dangling")
fd = os.open(A, os.O_RDONLY | os.O_DIRECTORY)
for _ in range(1100):
    os.mkdir("d", dir_fd=fd)
    child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
    os.close(fd)
    fd = child
os.close(fd)
os.mkfifo(A + "/pipe")
open(A + "/planted", "w").close()
time.sleep(600)
'''


def test_resume_never_chowns_through_what_the_agent_planted(tmp_path, scope, engine, host_secrets):
    host_file = host_secrets["file"]
    before = (host_file.stat().st_uid, host_file.stat().st_gid, host_file.parent.stat().st_uid)
    spec = spec_for(tmp_path, PLANT, {"EPG_TEST_HOST_FILE": str(host_file)})
    run_dir = tmp_path / "run"
    process = subprocess.Popen([sys.executable, "-m", "orchestrator.cli.app", "run", str(spec), "-o", str(run_dir), "--json"],
                               env={**os.environ, "EPG_SCOPE": scope}, cwd=REPO,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while not (run_dir / "workspace" / "analysis" / "planted").exists():
            assert time.monotonic() < deadline and process.poll() is None, "the agent never planted its links"
            time.sleep(0.2)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    try:
        result = run_cli("run", "--resume", str(run_dir), "--json", scope=scope, timeout=600)
        assert result.exit_code == 0, result.stderr
        assert json.loads(result.stdout)["terminal_reason"] == "finish_called"
        assert (host_file.stat().st_uid, host_file.stat().st_gid, host_file.parent.stat().st_uid) == before
        # The finished workspace is a plain directory again, with the agent's links kept out of it.
        analysis = run_dir / "workspace" / "analysis"
        assert not os.path.ismount(run_dir / "workspace") and (analysis / "planted").is_file()
        assert not any(p.is_symlink() for p in analysis.iterdir())
    finally:
        subprocess.run(["rm", "-rf", str(run_dir / "workspace")], check=False)  # deeper than shutil.rmtree goes


DISK = r'''
import json, os
A = "/workspace/analysis"
facts = {}

def fill(path, limit):
    written = 0
    try:
        with open(path, "wb") as handle:
            while written < limit:
                handle.write(b"x" * (1 << 20))
                handle.flush()
                written += 1 << 20
            os.fsync(handle.fileno())
    except OSError as exc:
        facts.setdefault("errors", {})[path] = exc.strerror
    finally:
        if os.path.exists(path):
            os.unlink(path)
    return written

facts["workspace_bytes"] = fill(A + "/big", 200 << 20)
facts["shm_bytes"] = fill("/dev/shm/big", 200 << 20)
facts["tmp_bytes"] = fill("/tmp/big", 200 << 20)
os.mkdir(A + "/many")
count = 0
try:
    for count in range(20000):
        open(f"{A}/many/{count}", "w").close()
    count = 20000
except OSError as exc:
    facts.setdefault("errors", {})["many"] = exc.strerror
for name in os.listdir(A + "/many"):
    os.unlink(f"{A}/many/{name}")
os.rmdir(A + "/many")
facts["files"] = count
json.dump(facts, open(A + "/disk.json", "w"))
'''


def test_the_agent_cannot_fill_the_hosts_disk_or_memory_through_its_workspace_tmp_or_shm(tmp_path, scope):
    limits = {"agent_workspace": "64m", "agent_workspace_files": 2000, "agent_tmp": "32m", "shm": "16m"}
    spec = spec_for(tmp_path, DISK, {}, limits=limits)
    run_dir = tmp_path / "run"
    result = run_cli("run", str(spec), "-o", str(run_dir), "--json", scope=scope, timeout=900)
    assert result.exit_code == 0, result.stderr
    facts = json.loads((run_dir / "workspace" / "analysis" / "disk.json").read_text())
    assert facts["workspace_bytes"] <= 64 << 20 and facts["shm_bytes"] <= 16 << 20 and facts["tmp_bytes"] <= 32 << 20, facts
    assert facts["files"] < 2000, facts
    assert set(facts["errors"].values()) == {"No space left on device"}, facts
    manifest = json.loads(result.stdout)
    assert manifest["workspace_bound"] == {"bytes": 64 << 20, "files": 2000}
    assert not (run_dir / "workspace.img").exists() and not os.path.ismount(run_dir / "workspace")


SUBMIT_AND_EXIT = r'''
import json, os, threading, time
from orchestrator.hostclient.client import SessionClient

SLOW = ("import time\n\nclass Policy:\n    def act(self, observation):\n        time.sleep(0.25)\n        return 0\n\n\n"
        "def make_policy(context):\n    return Policy()\n")
with open("/workspace/program/policy.py", "w") as handle:
    handle.write(SLOW)
client = SessionClient()
threading.Thread(target=lambda: SessionClient().submit("0:8"), daemon=True).start()
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    seen = client.status()
    if any(s["state"] == "running" for s in seen["submissions"]):
        break
    time.sleep(0.02)
time.sleep(float(os.environ["EPG_TEST_EXIT_AFTER_S"]))
seen = client.status()
with open("/workspace/analysis/at_exit.json", "w") as handle:
    json.dump(seen, handle)
os._exit(0)  # at once: the Submit call is still waiting for its receipt
'''


EXITS_AFTER_S = ("0", "0.5", "2")


@pytest.fixture(scope="module")
def left_behind(tmp_path_factory: pytest.TempPathFactory, scope: str) -> dict[str, tuple[CliResult, Path]]:
    """One Run per agent exit delay, all at once (independent Runs, each its own processes and containers):
    exit delay -> (the `run` command's result, its run directory)."""
    runs = {}
    for exit_after_s in EXITS_AFTER_S:
        root = tmp_path_factory.mktemp(f"left-behind-{exit_after_s}")
        spec = spec_for(root, SUBMIT_AND_EXIT, {"EPG_TEST_EXIT_AFTER_S": exit_after_s},
                        budget={"episodes": 16, "max_submissions": 4, "pool_size": 8})
        runs[exit_after_s] = (spec, root / "run")
    with ThreadPoolExecutor(max_workers=len(runs)) as pool:
        started = {key: pool.submit(run_cli, "run", str(spec), "-o", str(run_dir), "--json", scope=scope, timeout=900)
                   for key, (spec, run_dir) in runs.items()}
    return {key: (future.result(), runs[key][1]) for key, future in started.items()}


@pytest.mark.parametrize("exit_after_s", EXITS_AFTER_S)
def test_a_submission_the_agent_leaves_behind_ends_before_the_agent_phase_and_no_held_out_episode_overlaps_it(
        left_behind, exit_after_s):
    result, run_dir = left_behind[exit_after_s]
    assert result.exit_code == 0, result.stderr

    at_exit = json.loads((run_dir / "workspace" / "analysis" / "at_exit.json").read_text())
    assert [(s["id"], s["state"]) for s in at_exit["submissions"]] == [("s0001", "running")], "the agent exited mid-Submission"
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    position = {}
    for number, event in enumerate(events):
        position.setdefault(event["type"], number)  # first occurrence
    settled = [n for n, e in enumerate(events) if e["type"] in ("submission_completed", "submission_voided") and e["id"] == "s0001"]
    assert len(settled) == 1, events
    # The Submission ends, then the agent phase, then (and only then) any held-out Episode starts.
    assert position["submission_admitted"] < settled[0] < position["agent_exited"] < position["agent_phase_ended"], events
    held_out = [n for n, e in enumerate(events) if e["type"] == "prestart" and e["phase"] in ("validation", "assessment")]
    assert all(n > position["agent_phase_ended"] for n in held_out)
    assert position["agent_phase_ended"] < position["validation_done"]
    times = [e["time"] for e in events]
    assert times == sorted(times)
    assert events[-1]["type"] == "assessment_done"  # nothing of the agent phase is logged after the Run's end

    manifest = json.loads(result.stdout)
    assert manifest["terminal_reason"] == "exited_without_finish"
    ran = 0
    if events[settled[0]]["type"] == "submission_completed":
        record = json.loads((run_dir / "submissions" / "s0001" / "record.json").read_text())
        ran = len(record["feedback"]["episodes"])
        assert ran == 8
        assert held_out, "the completed Submission was validated"
        # Published before the copy-out, so the finished workspace holds it.
        assert json.loads((run_dir / "workspace" / "feedback" / "s0001" / "feedback.json").read_text())["score"] == record["feedback"]["score"]
    else:
        assert events[settled[0]]["reason"] == "agent_phase_ended"
    assert manifest["episodes_spent"] == ran
    assert manifest["submissions_made"] == (1 if ran else 0)


SUBMIT_AND_STAY = r'''
import time
from orchestrator.hostclient.client import SessionClient, HostApiError

SLOW = ("import time\n\nclass Policy:\n    def act(self, observation):\n        time.sleep(0.25)\n        return 0\n\n\n"
        "def make_policy(context):\n    return Policy()\n")
with open("/workspace/program/policy.py", "w") as handle:
    handle.write(SLOW)
try:
    SessionClient().submit("0:8")
except HostApiError:
    pass
time.sleep(600)
'''


def test_a_run_stopped_while_a_submission_is_in_flight_cancels_and_voids_it_before_it_exits(tmp_path, scope, engine):
    spec = spec_for(tmp_path, SUBMIT_AND_STAY, {}, budget={"episodes": 16, "max_submissions": 4, "pool_size": 8})
    run_dir = tmp_path / "run"
    process = subprocess.Popen([sys.executable, "-m", "orchestrator.cli.app", "run", str(spec), "-o", str(run_dir)],
                               env={**os.environ, "EPG_SCOPE": scope}, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 300
        events_path = run_dir / "events.jsonl"
        while not (events_path.exists() and "submission_admitted" in events_path.read_text()):
            assert time.monotonic() < deadline and process.poll() is None, process.stderr.read()[-2000:] if process.poll() else ""
            time.sleep(0.1)
        time.sleep(1.0)  # its first Episodes are under way
        stopped_at = time.monotonic()
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=120)
        took = time.monotonic() - stopped_at
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()

    assert process.returncode == 130, process.stderr.read()[-2000:]
    assert took < 60, f"the stopped Run took {took:.0f} s to exit"
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    ends = [(e["type"], e.get("reason")) for e in events if e["type"] in ("submission_completed", "submission_voided")]
    assert ends == [("submission_voided", "agent_phase_ended")], events
    assert not any(e["type"] in ("agent_phase_ended", "validation_done") for e in events)
    assert not (run_dir / "submissions" / "s0001" / "record.json").exists()
    owner = next(e["owner"] for e in events if e["type"] == "started")
    assert engine.client.containers.list(all=True, filters={"label": f"org.evopolicygym.owner={owner}"}, sparse=True) == []
