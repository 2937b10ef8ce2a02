"""Optional features behind extras: without the `kubernetes` client or matplotlib a command that needs one exits 3 with
one line naming the extra to install, never a traceback; `runs report` writes its page without the plots instead.

Nothing is uninstalled: each command runs in a fresh interpreter where the module cannot be imported, the Kubernetes
client through a package on PYTHONPATH whose import raises ImportError (as a broken or absent install does),
matplotlib through `sys.modules['matplotlib'] = None` (what Python does for a module it must not import).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml
from support.fake_runs import FakeRun, FakeSubmission, make_run

REPO = Path(__file__).resolve().parents[2]
KUBERNETES_EXTRA = "pip install 'epg-orchestrator[kubernetes]'"
REPORTS_EXTRA = "pip install 'epg-orchestrator[reports]'"
CLI = "from orchestrator.cli.app import main; main()"
NO_MATPLOTLIB = "import sys; sys.modules['matplotlib'] = None; "
ONE_SUBMISSION = FakeRun(submissions=[FakeSubmission(action=1, indices=[0, 1], rewards=[4.0, 6.0])], candidates=[0])


def run_without(module: str, code: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run python -c code args in a fresh interpreter in which module (kubernetes or matplotlib) cannot be imported."""
    shim = cwd / "shim"
    (shim / "kubernetes").mkdir(parents=True, exist_ok=True)
    (shim / "kubernetes" / "__init__.py").write_text("raise ImportError('no kubernetes client in this interpreter')\n")
    paths = [str(shim)] if module == "kubernetes" else []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*paths, str(REPO), os.environ.get("PYTHONPATH", "")]), "COLUMNS": "200"}
    if module == "matplotlib":
        code = NO_MATPLOTLIB + code
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120,
                          check=False)


def kubernetes_spec(directory: Path) -> Path:
    path = directory / "spec.yaml"
    path.write_text(yaml.safe_dump({"benchmark": "CartPole-v1", "agent": {"kind": "hill-climb"}, "sandbox": {"backend": "kubernetes"}}))
    return path


# Runs each command line of argv[1] (JSON) in turn in this one interpreter; prints each one's exit code, stdout and stderr.
_COMMANDS = """
import contextlib, io, json, sys
from orchestrator.cli.app import main

results = []
for line in json.loads(sys.argv[1]):
    sys.argv = ["epg-orchestrate", *line]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main()
            code = 0
        except SystemExit as exc:
            code = exc.code
    results.append({"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()})
print(json.dumps(results))
"""


def test_each_command_that_needs_the_kubernetes_client_names_its_extra_in_one_line_and_exits_3(tmp_path):
    spec = str(kubernetes_spec(tmp_path))
    suite = tmp_path / "suite.yaml"
    suite.write_text(yaml.safe_dump({"name": "k", "benchmarks": ["cartpole"], "agents": [{"name": "r", "agent": {"kind": "random"}}],
                                     "protocol": {"sandbox": {"backend": "kubernetes"}}}))
    lines = {
        "--backend kubernetes": [["gc", "--backend", "kubernetes"],
                                 ["evaluate", str(REPO / "environments" / "cartpole" / "baseline"), "--benchmark", "cartpole",
                                  "--backend", "kubernetes"]],
        "sandbox.backend: kubernetes": [["run", spec], ["spec", "check", spec], ["suite", "run", str(suite), "-o", str(tmp_path / "out")]],
    }
    everything = [line for group in lines.values() for line in group] + [["gc", "--backend", "kubernetes", "--json"]]
    result = run_without("kubernetes", _COMMANDS, json.dumps(everything), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    results = json.loads(result.stdout)
    expected = [(3, f"error: {feature} needs the optional package kubernetes: {KUBERNETES_EXTRA}\n")
                for feature, group in lines.items() for _ in group]
    assert [(r["code"], r["stderr"]) for r in results[:-1]] == expected
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shim", "spec.yaml", "suite.yaml"]  # nothing started, no run or suite directory
    # Under --json the missing extra is the error object, with a code of its own.
    error = json.loads(results[-1]["stdout"])
    assert results[-1]["code"] == 3 and error["exit_code"] == 3
    assert error["error"]["kind"] == "infrastructure" and error["error"]["code"] == "missing_extra"
    assert KUBERNETES_EXTRA in error["error"]["message"]


def test_the_kubernetes_backend_raises_module_not_found_naming_the_extra_when_its_client_does_not_import(tmp_path):
    code = ("try:\n    import orchestrator.backends.kubernetes.sandbox\n"
            "except ModuleNotFoundError as exc:\n    print(exc.name, exc, sep='|')\n")
    result = run_without("kubernetes", code, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"kubernetes|the Kubernetes backend needs the kubernetes client: {KUBERNETES_EXTRA}\n"


def test_an_optional_module_imported_deep_in_a_command_is_still_one_line_and_any_other_import_error_a_traceback(tmp_path):
    deep = ("import orchestrator.cli.app as cli\n"
            "def app():\n    import orchestrator.backends.kubernetes.sandbox  # as a Run's driver opens its sandbox\n"
            "cli.app = app\ncli.main()\n")
    result = run_without("kubernetes", deep, cwd=tmp_path)
    assert (result.returncode, result.stderr) == (3, f"error: this command needs the optional package kubernetes: {KUBERNETES_EXTRA}\n")
    other = ("import orchestrator.cli.app as cli\n"
             "def app():\n    raise ModuleNotFoundError('No module named yaml', name='yaml')\n"
             "cli.app = app\ncli.main()\n")
    result = run_without("kubernetes", other, cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" in result.stderr and "No module named yaml" in result.stderr


def test_runs_report_without_matplotlib_writes_its_page_without_plots_and_says_why(tmp_path):
    run_dir = make_run(tmp_path / "run", ONE_SUBMISSION)
    result = run_without("matplotlib", CLI, "runs", "report", str(run_dir), "--json", "--html", str(tmp_path / "page.html"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["plots"] == [] and REPORTS_EXTRA in document["plots_left_out"]
    assert document["episodes_spent"] == 2 and document["submissions"][0]["score"] == 5.0
    page = (tmp_path / "page.html").read_text()
    assert 'id="plots-left-out"' in page and REPORTS_EXTRA.replace("'", "&#x27;") in page and "<img" not in page
    assert "<h2>Submissions</h2>" in page
    text = run_without("matplotlib", CLI, "runs", "report", str(run_dir), cwd=tmp_path)
    assert text.returncode == 0, text.stderr
    assert f"note: No plots: they need matplotlib, which is not installed ({REPORTS_EXTRA})." in text.stderr.splitlines()
    assert (run_dir / "report.html").is_file()


def test_runs_report_with_matplotlib_leaves_no_plot_out(tmp_path, monkeypatch):
    from orchestrator.reports.report import write_html_report

    monkeypatch.setattr("orchestrator.reports.plots.run_plots", lambda diagnostics: [])  # drawing is test_report_diagnostics'
    run_dir = make_run(tmp_path / "run", ONE_SUBMISSION)
    document = write_html_report(run_dir, tmp_path / "page.html")
    assert document["plots_left_out"] is None and document["plots"] == []
    assert 'id="plots-left-out"' not in (tmp_path / "page.html").read_text()


def test_suite_report_html_without_matplotlib_names_the_reports_extra_and_writes_nothing(tmp_path):
    (tmp_path / "suite").mkdir()
    page = tmp_path / "page.html"
    result = run_without("matplotlib", CLI, "suite", "report", str(tmp_path / "suite"), "--html", str(page), cwd=tmp_path)
    assert (result.returncode, result.stderr) == (3, f"error: suite report --html needs the optional package matplotlib: {REPORTS_EXTRA}\n")
    assert not page.exists()
