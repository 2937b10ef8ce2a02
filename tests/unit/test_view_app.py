"""The view's HTTP app in process (Starlette's test client, no socket): the token, the host check, the security headers,
the JSON it serves, the image route and the live events; and `epg-orchestrate view` serving on 127.0.0.1 only."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

from starlette.testclient import TestClient
from support.fake_runs import FakeRun, FakeSubmission, make_run
from test_view_reading import png, with_artifact

from orchestrator.view.app import COOKIE, CSP, create_app

REPO = Path(__file__).resolve().parents[2]
TOKEN = "t0ken-" + "x" * 40
PORT = 40999
ONE = FakeRun(submissions=[FakeSubmission(action=1, indices=[0, 1], rewards=[4.0, 6.0])], candidates=[0])


def cli_env() -> dict[str, str]:
    """This process's environment with the repository (and its sdk/ and compat/) first on the import path."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "sdk"), str(REPO / "compat"), os.environ.get("PYTHONPATH", "")])}


def client(root: Path) -> TestClient:
    return TestClient(create_app(root, token=TOKEN, port=PORT, poll_seconds=0.05), base_url=f"http://127.0.0.1:{PORT}", follow_redirects=False)


def test_every_route_answers_401_without_the_token(tmp_path):
    make_run(tmp_path / "alpha", ONE)
    web = client(tmp_path)
    for path in ("/", "/run?path=alpha", "/api/index", "/api/run?path=alpha", "/api/watch?what=index", "/static/view.js",
                 "/api/image?path=alpha&submission=s0001&name=a.png"):
        response = web.get(path)
        assert response.status_code == 401, path
        assert "Fake-v0" not in response.text
    assert web.get("/api/index", params={"token": "wrong"}).status_code == 401
    assert web.get("/api/index", headers={"authorization": "Bearer wrong"}).status_code == 401
    web.cookies.set(COOKIE, "wrong")
    assert web.get("/api/index").status_code == 401


def test_the_token_in_the_url_becomes_an_http_only_strict_cookie_and_leaves_the_url(tmp_path):
    make_run(tmp_path / "alpha", ONE)
    web = client(tmp_path)
    response = web.get(f"/run?path=alpha&token={TOKEN}")
    assert response.status_code == 303 and response.headers["location"] == "/run?path=alpha"
    cookie = response.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}={TOKEN};") and "HttpOnly" in cookie and "SameSite=strict" in cookie
    web.cookies.set(COOKIE, TOKEN)
    index = web.get("/api/index")
    assert index.status_code == 200 and index.json()["rows"][0]["benchmark"] == "Fake-v0"
    assert web.get("/api/index", headers={"authorization": f"Bearer {TOKEN}"}).status_code == 200


def test_a_request_naming_another_host_is_refused(tmp_path):
    web = client(tmp_path)
    for host in ("evil.example", f"evil.example:{PORT}", "127.0.0.1:1", f"0.0.0.0:{PORT}"):
        assert web.get("/api/index", headers={"host": host, "authorization": f"Bearer {TOKEN}"}).status_code == 403, host
    assert web.get("/api/index", headers={"host": f"localhost:{PORT}", "authorization": f"Bearer {TOKEN}"}).status_code == 200


def test_every_response_carries_the_csp_nosniff_and_no_referrer(tmp_path):
    make_run(tmp_path / "alpha", ONE)
    web = client(tmp_path)
    auth = {"authorization": f"Bearer {TOKEN}"}
    for path in ("/", "/static/view.js", "/static/view.css", "/api/index", "/api/run?path=missing", "/nothing"):
        headers = web.get(path, headers=auth).headers
        assert headers["content-security-policy"] == CSP and headers["x-content-type-options"] == "nosniff", path
        assert headers["referrer-policy"] == "no-referrer", path
    assert "default-src 'self'" in CSP and "unsafe" not in CSP and "http" not in CSP
    page = web.get("/", headers=auth).text
    assert "<script src=\"/static/view.js\" defer></script>" in page and not re.search(r"<script>|\son\w+=", page)
    assert web.get("/static/view.js", headers=auth).headers["content-type"].startswith("text/javascript")
    assert web.get("/static/page.html", headers=auth).status_code == 404


def test_the_script_never_writes_html(tmp_path):
    script = (REPO / "orchestrator" / "view" / "static" / "view.js").read_text()
    assert not re.search(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function", script)


def test_image_route_serves_a_png_with_its_type_and_refuses_svg(tmp_path):
    run_dir = make_run(tmp_path / "alpha", ONE)
    with_artifact(run_dir, "frame.png", png())
    with_artifact(run_dir, "trap.png", b"<svg xmlns='http://www.w3.org/2000/svg'/>")
    web = client(tmp_path)
    auth = {"authorization": f"Bearer {TOKEN}"}
    image = web.get("/api/image", params={"path": "alpha", "submission": "s0001", "name": "frame.png"}, headers=auth)
    assert image.status_code == 200 and image.content == png() and image.headers["content-type"] == "image/png"
    assert image.headers["content-disposition"].startswith("inline") and image.headers["x-content-type-options"] == "nosniff"
    assert web.get("/api/image", params={"path": "alpha", "submission": "s0001", "name": "trap.png"}, headers=auth).status_code == 404


def test_run_and_suite_documents_and_a_missing_run(tmp_path):
    make_run(tmp_path / "alpha", ONE)
    web = client(tmp_path)
    auth = {"authorization": f"Bearer {TOKEN}"}
    run = web.get("/api/run", params={"path": "alpha"}, headers=auth).json()
    assert run["submissions"][0]["id"] == "s0001" and run["row"]["status"] == "finished"
    missing = web.get("/api/run", params={"path": "../etc"}, headers=auth)
    assert missing.status_code == 404 and "not a plain relative path" in missing.json()["error"]
    assert web.get("/api/elsewhere", headers=auth).status_code == 404


def test_the_event_stream_says_change_at_once(tmp_path):
    make_run(tmp_path / "alpha", ONE)
    web = client(tmp_path)
    with web.stream("GET", "/api/watch", params={"what": "run", "path": "alpha"}, headers={"authorization": f"Bearer {TOKEN}"}) as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        seen = ""
        for chunk in stream.iter_text():
            seen += chunk
            if "event: change" in seen:
                break
    assert "event: change\ndata: 1\n" in seen


def test_view_serves_on_loopback_only_and_prints_its_url_with_a_fresh_token(tmp_path):
    make_run(tmp_path / "alpha", ONE)
    env = cli_env()
    process = subprocess.Popen([sys.executable, "-m", "orchestrator.cli.app", "view", str(tmp_path)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = process.stdout.readline()
        match = re.search(r"(http://127\.0\.0\.1:(\d+))/\?token=([A-Za-z0-9_-]{40,})", line)
        assert match, line + process.stderr.read()
        base, port, token = match.group(1), int(match.group(2)), match.group(3)
        listening = subprocess.run(["ss", "-Htln", f"sport = :{port}"], capture_output=True, text=True).stdout
        assert [line.split()[3] for line in listening.splitlines()] == [f"127.0.0.1:{port}"]  # its one socket, on loopback
        try:
            urllib.request.urlopen(f"{base}/api/index", timeout=10)
            raise AssertionError("answered without the token")
        except urllib.error.HTTPError as exc:
            assert exc.code == 401
        request = urllib.request.Request(f"{base}/api/index", headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            assert b"Fake-v0" in response.read()
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_view_without_its_extra_says_which_extra_in_one_line_and_exits_3(tmp_path):
    code = "import sys; sys.modules['starlette'] = None; from orchestrator.cli.app import main; main()"
    env = {**cli_env(), "COLUMNS": "200"}
    result = subprocess.run([sys.executable, "-c", code, "view", str(tmp_path)], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 3 and result.stdout == ""
    assert result.stderr.strip() == "error: view needs the optional package starlette: pip install 'epg-orchestrator[view]'"


def test_view_of_a_missing_directory_is_bad_input(tmp_path):
    env = cli_env()
    result = subprocess.run([sys.executable, "-m", "orchestrator.cli.app", "view", str(tmp_path / "nothing")], capture_output=True, text=True,
                            env=env, timeout=120)
    assert result.returncode == 1 and "not a directory" in result.stderr


def test_the_url_token_is_taken_once_and_then_only_the_browser_holding_the_cookie_gets_in(tmp_path):
    make_run(tmp_path / "alpha", ONE)
    app = create_app(tmp_path, token=TOKEN, port=PORT, poll_seconds=0.05)
    first = TestClient(app, base_url=f"http://127.0.0.1:{PORT}", follow_redirects=False)
    other = TestClient(app, base_url=f"http://127.0.0.1:{PORT}", follow_redirects=False)
    assert first.get(f"/?token={TOKEN}").status_code == 303
    first.cookies.set(COOKIE, TOKEN)
    assert first.get(f"/?token={TOKEN}").status_code == 303 and first.get("/api/index").status_code == 200  # its own URL again
    spent = other.get(f"/?token={TOKEN}")
    assert spent.status_code == 401 and "taken by the browser that opened it first" in spent.text and "set-cookie" not in spent.headers
    assert other.get("/api/index", headers={"authorization": f"Bearer {TOKEN}"}).status_code == 200


def test_view_stopped_by_ctrl_c_exits_130_even_started_with_ctrl_c_ignored(tmp_path):
    """A shell starts a background command with SIGINT ignored; uvicorn still stops on it, and the status says stopped."""
    process = subprocess.Popen([sys.executable, "-m", "orchestrator.cli.app", "view", str(tmp_path)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=cli_env(),
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        line = process.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:\d+", line)
        assert match, line + process.stderr.read()
        try:  # an answer: the server runs, with its signal handlers in place
            urllib.request.urlopen(f"{match.group(0)}/api/index", timeout=10)
        except urllib.error.HTTPError as exc:
            assert exc.code == 401
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 130, process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
