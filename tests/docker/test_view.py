"""`epg-orchestrate view` in headless Chromium: a real CartPole Run watched live on the index and its Run page until it
is finished, without a reload; Submission rows, a diff, a Feedback image and a two-Run suite's ranking rendered; every
request of the browser to the view's own 127.0.0.1 port; 401 without the token; hostile records shown as text.

Chromium runs with networking shut (every name resolves to nothing, a closed proxy) except the loopback address, and
every request it makes is recorded and any to another origin aborted.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml
from programs import STEADY
from support.browser import chromium_executable
from support.fake_runs import FakeRun, FakeSubmission, make_run
from unit.test_view_reading import png, with_artifact

REPO = Path(__file__).resolve().parents[2]
BASELINE = REPO / "environments" / "cartpole" / "baseline"
BROWSER_ARGS = [
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",  # no name resolves; the view's address is a literal
    "--proxy-server=http://127.0.0.1:9",  # anything not bypassed goes to the discard port: nowhere
    "--proxy-bypass-list=127.0.0.1",
    "--disable-background-networking", "--disable-component-update", "--disable-default-apps", "--disable-sync", "--no-first-run",
]
SPEC = {
    "benchmark": "CartPole-v1",
    "budget": {"episodes": 24, "max_submissions": 8, "pool_size": 8},
    "validation": {"episodes": 4, "max_candidates": 2},
    "assessment": {"episodes": 4},
}
HOSTILE = "<img src=x onerror=\"window.__pwned=1\"><script>window.__pwned=2</script>\x1b[31m\x07"


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A directory with a short path: a Run's Host API socket lies below it, and a socket's path holds 107 bytes."""
    path = Path(tempfile.mkdtemp(prefix="view-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@contextmanager
def serving(directory: Path) -> Iterator[tuple[str, str]]:
    """`epg-orchestrate view directory` in a subprocess: (its base URL, its URL with the token) while it serves."""
    process = subprocess.Popen([sys.executable, "-m", "orchestrator.cli.app", "view", str(directory)], cwd=REPO,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        match = re.search(r"(http://127\.0\.0\.1:\d+)/\?token=\S+", line)
        assert match, line + process.stderr.read()
        yield match.group(1), match.group(0)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    assert process.returncode == 130, process.stderr.read()  # stopped by Ctrl-C, as every command


@contextmanager
def browser(base: str) -> Iterator[tuple[Any, list[str]]]:
    """A Chromium context that records every request and aborts any outside base; (context, requested URLs)."""
    from playwright.sync_api import sync_playwright

    requested: list[str] = []
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=chromium_executable(), headless=True, args=BROWSER_ARGS)
        try:
            context = chromium.new_context(viewport={"width": 1300, "height": 900}, service_workers="block")
            context.on("request", lambda request: requested.append(request.url))

            def route(request_route: Any) -> None:
                if request_route.request.url.startswith(base + "/"):
                    request_route.continue_()
                else:
                    request_route.abort()

            context.route("**/*", route)
            yield context, requested
        finally:
            chromium.close()


def watch_phases(page: Any) -> None:
    """Keep, in the page, every phase its gauge shows and every status of a row, as the page draws them again."""
    page.evaluate("""() => {
        window.__marker = "not reloaded"; window.__phases = []; window.__statuses = [];
        const note = () => {
            const phase = document.querySelector("#phase-gauge .current");
            if (phase && window.__phases[window.__phases.length - 1] !== phase.textContent) window.__phases.push(phase.textContent);
            const status = document.querySelector('#index-rows tr[data-path="cartpole"] .status');
            if (status && window.__statuses[window.__statuses.length - 1] !== status.textContent) window.__statuses.push(status.textContent);
        };
        new MutationObserver(note).observe(document.getElementById("main"), {childList: true, subtree: true, characterData: true});
        note();
    }""")


def picture_run(directory: Path) -> None:
    """A finished Run whose first Submission kept a PNG Feedback image (the CartPole Benchmark publishes none)."""
    run_dir = make_run(directory, FakeRun(submissions=[FakeSubmission(action=1, indices=[0, 1], rewards=[4.0, 6.0])], candidates=[0]))
    with_artifact(run_dir, "episode-000/frame.png", png(24, 16))


def two_run_suite(directory: Path, real_run: Path) -> None:
    """A suite of two CartPole Runs by two agents: a copy of the real Run, and a written one that scored lower."""
    shutil.copytree(real_run, directory / "runs" / "steady", ignore=shutil.ignore_patterns("host", "private"))
    other = make_run(directory / "runs" / "lazy", FakeRun(submissions=[FakeSubmission(action=0, indices=[0], rewards=[9.0])], candidates=[0]))
    manifest = json.loads((other / "run.json").read_text())
    (other / "run.json").write_text(json.dumps({**manifest, "benchmark": "CartPole-v1", "metric": {"name": "mean_return", "direction": "maximize"}}))
    (other / "spec.yaml").write_text("benchmark: CartPole-v1\n")
    planned = [{"name": name, "run_dir": f"runs/{name}", "spec": f"specs/{name}.yaml", "benchmark": "CartPole-v1", "family": "classic",
                "agent": agent, "repeat": 0, "seed": 0} for name, agent in (("steady", "steady-agent"), ("lazy", "lazy-agent"))]
    (directory / "suite.json").write_text(json.dumps({"schema": "epg.suite/1", "name": "pair", "runs": planned}))


def test_view_follows_a_real_cartpole_run_to_finished_and_shows_its_records_without_network(short_dir, write_program, scope):
    steady = write_program(STEADY)
    spec = short_dir / "spec.yaml"
    spec.write_text(yaml.safe_dump({**SPEC, "agent": {"kind": "scripted", "finish": "all", "steps": [
        {"program": str(BASELINE), "episodes": "0:4"}, {"program": str(steady), "episodes": "0:2,5"}]}}))
    runs = short_dir / "runs"
    runs.mkdir()
    picture_run(runs / "pictures")
    with serving(runs) as (base, url), browser(base) as (context, requested):
        index = context.new_page()
        index.goto(url)
        index.wait_for_selector('#index-rows tr[data-path="pictures"]')
        watch_phases(index)
        run = subprocess.Popen([sys.executable, "-m", "orchestrator.cli.app", "run", str(spec), "-o", str(runs / "cartpole"), "--json"],
                               cwd=REPO, env={**os.environ, "EPG_SCOPE": scope}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            index.wait_for_selector('#index-rows tr[data-path="cartpole"]', timeout=120_000)
            page = context.new_page()
            page.goto(f"{base}/run?path=cartpole")
            page.wait_for_selector("#phase-gauge .current")
            watch_phases(page)
            # Selectors, not wait_for_function: the page's CSP allows no eval, which a predicate given as text needs.
            page.wait_for_selector("#run-status.status-finished", timeout=600_000)
            index.wait_for_selector('#index-rows tr[data-path="cartpole"] .status-finished', timeout=60_000)
            out, err = run.communicate(timeout=120)
        finally:
            if run.poll() is None:
                run.send_signal(signal.SIGTERM)
                run.wait(timeout=120)
        assert run.returncode == 0, err[-3000:]
        assert json.loads(out)["phase"] == "done"

        # Both pages moved on by themselves: no reload (the marker set in each survived), the phases in order.
        phases = page.evaluate("window.__phases")
        assert page.evaluate("window.__marker") == index.evaluate("window.__marker") == "not reloaded"
        assert phases[0] == "agent" and phases[-1] == "finished", phases
        order = ["agent", "validation", "assessment", "finished"]
        assert [order.index(p) for p in phases] == sorted(order.index(p) for p in phases), phases
        statuses = index.evaluate("window.__statuses")
        assert statuses[0] == "running" and statuses[-1] == "finished", statuses

        # The Run page: a row per Submission, the latest one's diff against the baseline, Validation and Assessment.
        rows = page.locator("#submissions tr.submission-row")
        assert rows.count() == 2 and rows.nth(0).locator("td").nth(1).text_content() == "0:4"
        latest = page.locator('details.submission[data-id="s0002"]')
        assert latest.get_attribute("open") is not None
        diff = latest.locator(".diff").text_content()
        assert "params.json: +0 -" in diff and "(removed)" in diff and "policy.py" in diff
        assert latest.locator(".diff-lines .add").count() > 0 and "observation[2] + 0.5 * observation[3]" in diff
        assert latest.locator("tr.episode").count() == 3
        assert page.locator("#validation tr").count() == 3
        assert "score 500" in page.locator("#assessment-score").text_content()
        assert page.locator("#score-plot circle").count() == 2
        rows.nth(0).click()  # a row opens its Submission's panel
        assert page.locator('details.submission[data-id="s0001"]').get_attribute("open") is not None

        # A Feedback image, served from the run directory, drawn by the browser.
        pictures = context.new_page()
        pictures.goto(f"{base}/run?path=pictures")
        image = pictures.locator("img.artifact-image")
        image.wait_for()
        deadline = time.monotonic() + 30
        while not image.evaluate("img => img.complete") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert image.evaluate("img => [img.naturalWidth, img.naturalHeight]") == [24, 16]

        # A suite of two Runs: ranked, its cells linking to their Runs, then listed in the index with them.
        two_run_suite(runs / "pair", runs / "cartpole")
        suite = context.new_page()
        suite.goto(f"{base}/suite?path=pair")
        suite.wait_for_selector("#standings tr.standing")
        standings = [suite.locator("#standings tr.standing").nth(i).locator("td").nth(1).text_content() for i in range(2)]
        assert standings == ["steady-agent", "lazy-agent"]
        assert suite.locator("#suite-table a").evaluate_all("links => links.map(a => a.getAttribute('href'))") == [
            "/run?path=pair%2Fruns%2Fsteady", "/run?path=pair%2Fruns%2Flazy"]
        index.wait_for_selector('#index-rows tr[data-path="pair"]', timeout=30_000)

        # Nothing but the view's own origin was asked for.
        assert requested and [url for url in requested if not url.startswith(base + "/")] == []

        # Without the token: 401, whatever the route.
        for path in ("/", "/api/index", "/api/run?path=cartpole", "/api/watch?what=index"):
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(base + path, timeout=10)
            assert refused.value.code == 401
        fresh = context.browser.new_context()
        try:
            assert fresh.request.get(f"{base}/api/index").status == 401
        finally:
            fresh.close()


def hostile_run(directory: Path) -> None:
    """A Run whose Program file name, Feedback value, policy stderr, model reply and image name hold markup and controls."""
    relay = [{"seq": 1, "time": 100.0, "method": "POST", "path": "/v1/messages", "status": 200, "seconds": 0.5, "tokens": 10,
              "request": json.dumps({"model": "m", "messages": [{"role": "user", "content": "ask " + HOSTILE}]}),
              "response": json.dumps({"content": [{"type": "text", "text": "reply " + HOSTILE},
                                                  {"type": "tool_use", "name": HOSTILE, "input": {"cmd": HOSTILE}}]})}]
    run_dir = make_run(directory, FakeRun(submissions=[FakeSubmission(action=1, indices=[0], rewards=[4.0]),
                                                       FakeSubmission(action=0, indices=[1], rewards=[None])], relay=relay))
    for submission in ("s0001", "s0002"):
        record_path = run_dir / "submissions" / submission / "record.json"
        record = json.loads(record_path.read_text())
        record["feedback"]["values"]["note"] = "value " + HOSTILE
        record["feedback"]["episodes"][0]["output_tail"] = "stderr " + HOSTILE
        record_path.write_text(json.dumps(record))
    # The second Submission's Program gains a file whose name is markup: its diff names it.
    record = json.loads((run_dir / "submissions" / "s0002" / "record.json").read_text())
    program = run_dir / "programs" / record["program_digest"].removeprefix("sha256:")
    name = '<img src=x onerror="window.__pwned=3">.py'
    (program / name).write_text("# file " + HOSTILE + "\n")
    from orchestrator.kernel.program import capture_program

    digest = capture_program(program).digest
    program.rename(run_dir / "programs" / digest.removeprefix("sha256:"))
    record["program_digest"] = digest
    (run_dir / "submissions" / "s0002" / "record.json").write_text(json.dumps(record))
    with_artifact(run_dir, '"><img src=x onerror="window.__pwned=4">.png', png())


def test_hostile_records_are_shown_as_text_and_run_no_script(short_dir):
    runs = short_dir / "runs"
    runs.mkdir()
    hostile_run(runs / "hostile")
    with serving(runs) as (base, url), browser(base) as (context, requested):
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(url)
        page.wait_for_selector('#index-rows tr[data-path="hostile"]')
        page.goto(f"{base}/run?path=hostile")
        page.wait_for_selector("#submissions")
        page.wait_for_selector("img.artifact-image", state="attached")  # in the first Submission's panel, closed or not
        time.sleep(1)  # room for any onerror or injected script to have run
        assert page.evaluate("typeof window.__pwned") == "undefined"
        text = page.locator("main").text_content()
        shown = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>\\x1b[31m\\x07'
        for where in ("stderr ", "ask ", "reply ", "file "):
            assert where + shown in text, where
        assert json.dumps("value " + HOSTILE)[1:-1] in text  # the Feedback values are shown as their JSON
        assert '<img src=x onerror="window.__pwned=3">.py' in text and '"><img src=x onerror="window.__pwned=4">.png' in text
        assert "\x1b" not in text and "\x07" not in text
        # Nothing from the records became an element: the only images are the artifact's, the only scripts the page's.
        assert page.locator("main img").count() == 1 and page.locator("main img").get_attribute("class") == "artifact-image"
        assert page.evaluate("Array.from(document.scripts).map(s => s.src)") == [f"{base}/static/view.js"]
        assert page.evaluate("document.querySelectorAll('[onerror]').length") == 0
        assert errors == [] and [url for url in requested if not url.startswith(base + "/")] == []
