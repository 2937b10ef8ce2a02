"""A real Run whose agent floods the Host's relay: the Host's threads, memory and relay record stay bounded, the agent
phase ends with a relay limit, and the Run finishes."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml
from support.relay_harness import CHAT_SSE, FakeUpstream, command_agent_spec, environment_without_proxies, serving

REPO = Path(__file__).resolve().parents[2]
MAX_HOST_THREADS = 150  # the Host's own (Host API, sandbox lanes, pool) and at most 64 relay connections
MAX_HOST_RSS_MIB = 768
MAX_RECORD_BYTES = 256 * 1024

# Inside the agent container: one Submission, three model calls, then for 20 s (until the Host stops it) refused
# requests with 3 MiB of 0xFF bytes (declared as 3 or 100 MiB), bodies over the relay's size bound, 2000 idle
# connections held open, heads that never end, and more model calls; straight to the relay's Unix socket, as a hostile
# agent would.
FLOOD = r'''set -e
epg-session submit --episodes 0:1
python3 - <<'EOF'
import json, os, socket, time
SOCK = "/epg/host/relay.sock"
began = time.monotonic()
log = {"answers": {}, "connect_errors": 0, "idle_held": 0}

def save():
    with open("analysis/flood.tmp", "w") as handle:
        json.dump(log, handle)
    os.replace("analysis/flood.tmp", "analysis/flood.json")

def connect():
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.settimeout(5)
    client.connect(SOCK)
    return client

def status(client):
    data = b""
    try:
        while chunk := client.recv(65536):  # the whole answer: every request here ends with the connection
            data += chunk
    except OSError:
        pass
    return data.split(b" ")[1].decode() if data.startswith(b"HTTP/") else "closed"

def attempt(kind, head, body=b""):
    try:
        client = connect()
    except OSError:
        log["connect_errors"] += 1
        return
    try:
        client.sendall(head)
        if body:
            client.sendall(body)
    except OSError:
        pass
    answer = status(client)
    client.close()
    log["answers"].setdefault(kind, {}).setdefault(answer, 0)
    log["answers"][kind][answer] += 1

def chat():
    body = json.dumps({"model": "m", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}).encode()
    attempt("chat", b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %d\r\n\r\n" % len(body), body)

junk = b"\xff" * (3 << 20)
for _ in range(3):
    chat()
save()
for _ in range(20):
    attempt("refused_path", b"POST /v1/files HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (100 << 20), junk)
    attempt("refused_path", b"POST /v1/files HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(junk), junk)
    attempt("too_big", b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (40 << 20), junk)
save()
held = []
for number in range(2000):
    try:
        client = connect()
        if number % 100 == 0:
            client.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHo")  # a head that never ends
        held.append(client)
    except OSError:
        log["connect_errors"] += 1
log["idle_held"] = len(held)
save()
while time.monotonic() - began < 20:
    attempt("refused_path", b"POST /v1/files HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (100 << 20), junk)
    chat()
    save()
EOF
sleep 60
'''


def spec(upstream: str) -> dict:
    return command_agent_spec(FLOOD, {"profile": "openai-compatible", "upstream": upstream, "timeout_s": 20})


def watch(pid: int, peaks: dict[str, int], stop: threading.Event) -> None:
    """Keep the highest Threads and VmRSS (KiB) of /proc/PID/status until stop is set or the process is gone."""
    while not stop.is_set():
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return
        for line in status.splitlines():
            key, _, value = line.partition(":")
            if key in ("Threads", "VmRSS"):
                peaks[key] = max(peaks.get(key, 0), int(value.split()[0]))
        time.sleep(0.1)


def test_agent_flooding_the_relay_is_stopped_with_the_hosts_threads_memory_and_record_bounded(tmp_path, scope):
    model_server = FakeUpstream(answer=CHAT_SSE)
    with serving(model_server):
        (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec(model_server.url)))
        run_dir = tmp_path / "run"
        process = subprocess.Popen(
            [sys.executable, "-m", "orchestrator.cli.app", "run", str(tmp_path / "spec.yaml"), "-o", str(run_dir), "--json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
            env={**environment_without_proxies(), "EPG_SCOPE": scope},
        )
        peaks: dict[str, int] = {}
        stop = threading.Event()
        watcher = threading.Thread(target=watch, args=(process.pid, peaks, stop), daemon=True)
        watcher.start()
        try:
            stdout, stderr = process.communicate(timeout=600)
        finally:
            stop.set()
            process.kill()
        watcher.join(5)
    assert process.returncode == 0, stderr[-3000:]
    manifest = json.loads(stdout)

    # The agent phase ended on the relay's limit (the refused connections), and the Run went on to its end.
    assert manifest["terminal_reason"] == "relay_limit", manifest
    assert manifest["relay"]["limit_reached"].startswith("too many refused connections (1024"), manifest["relay"]
    assert manifest["final"]["submission_id"] == "s0001" and manifest["assessment"]["score"] > 0
    events = [json.loads(line)["type"] for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert events.index("agent_phase_ended") < events.index("validation_done") < events.index("assessment_done")

    # The Host never held a thread per connection, nor the refused bodies.
    assert peaks["Threads"] <= MAX_HOST_THREADS, peaks
    assert peaks["VmRSS"] <= MAX_HOST_RSS_MIB * 1024, peaks

    # The record holds the model calls and short summaries of the refusals, never a refused body.
    record = run_dir / "relay" / "exchanges.1.jsonl"
    assert record.stat().st_size <= MAX_RECORD_BYTES
    entries = [json.loads(line) for line in record.read_text().splitlines()]
    forwarded = [e for e in entries if not e["refused"]]
    assert len(forwarded) >= 3 and all(e["status"] == 200 and e["tokens"] == 4 for e in forwarded)
    assert all(e["request"] == "" and e["response"] == "" for e in entries if e["refused"])
    assert "\ufffd" not in record.read_text(encoding="utf-8")
    assert {e["status"] for e in entries if e["refused"]} <= {403, 413, 408, 429}
    assert len(model_server.seen) == len(forwarded)
