"""Text a policy, a Benchmark or an image chose, printed by `evaluate` and `env test`: never markup, never raw
control characters on the terminal, and the command ends normally whatever the text holds."""

from __future__ import annotations

import os

import pytest
from rich.console import Console
from support.cli import invoke_cli

from epg_sdk.codes import EpisodeStatus, FailureCode
from orchestrator.cli import evaluate
from orchestrator.cli.terminal import markup_safe, plain, visible
from orchestrator.envcheck import EnvCheck, EnvReport
from orchestrator.kernel.evaluation import Evaluation
from orchestrator.kernel.outcomes import EpisodeOutcome
from orchestrator.kernel.ports import BenchmarkInfo, EvaluationFeedback
from orchestrator.kernel.program import capture_program

# A closing tag with nothing open (rich raises MarkupError), a clear-screen sequence, a one-byte C1 CSI,
# a right-to-left override, a carriage return that would overwrite the line.
HOSTILE = "boom [/] [bold red]x \x1b[2J \x9b31m \u202eevil\r done"
SHOWN = "boom [/] [bold red]x \\x1b[2J \\x9b31m \\u202eevil\\x0d done"


def render(renderable) -> str:
    console = Console(width=400, color_system=None, force_terminal=False)
    with console.capture() as captured:
        console.print(renderable)
    return captured.get()


# the rule


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b[2J", "\\x1b[2J"),
        ("\x00\x07\x08\x0b\x0c\x0d\x1f\x7f", "\\x00\\x07\\x08\\x0b\\x0c\\x0d\\x1f\\x7f"),
        ("\x80\x9b\x9f", "\\x80\\x9b\\x9f"),
        ("a\u202eb\u2066c\u200fd\u061c", "a\\u202eb\\u2066c\\u200fd\\u061c"),
    ],
)
def test_every_control_character_is_written_as_a_visible_escape(raw, shown):
    assert visible(raw) == shown


def test_newlines_tabs_and_ordinary_text_are_left_as_they_are():
    text = "Traceback (most recent call last):\n\tFile \"policy.py\", line 3 · é ü 中 [x] \\x1b\n"
    assert visible(text) == text


def test_plain_text_is_printed_with_its_brackets_and_its_controls_visible():
    assert render(plain(HOSTILE)).rstrip("\n") == SHOWN
    assert "\x1b" not in render(plain(HOSTILE))


def test_markup_safe_text_keeps_its_brackets_inside_a_markup_string():
    assert render(f"[red]reason:[/] {markup_safe(HOSTILE)}").rstrip("\n") == f"reason: {SHOWN}"


# evaluate


def hostile_evaluation(program_dir) -> Evaluation:
    benchmark = BenchmarkInfo(id="CartPole-v1 [/]", description="", observation_space=None, action_space=None, horizon=500,
                              primary_metric="return [/]\x1b]0;title\x07", direction="maximize", parameters={}, failure_return=0.0)
    outcome = dict(split="train", steps=3, reward=3.0, terminated=True, truncated=False, policy_seconds=0.1, environment_seconds=0.0)
    episodes = (
        EpisodeOutcome(index=0, status=EpisodeStatus.COMPLETED, failure=None, reason="", **outcome),
        EpisodeOutcome(index=1, status=EpisodeStatus.POLICY_FAILURE, failure=FailureCode.EXCEPTION, reason=HOSTILE,
                       output_tail=HOSTILE, traceback=HOSTILE, **outcome),
    )
    feedback = EvaluationFeedback(score=1.5, values={"note": HOSTILE}, artifacts={}, episodes=episodes)
    return Evaluation(benchmark=benchmark, program=capture_program(program_dir), split="train", seed=0, feedback=feedback)


@pytest.fixture
def program_dir(tmp_path):
    directory = tmp_path / "program"
    directory.mkdir()
    (directory / "policy.py").write_text("def make_policy(context):\n    return None\n")
    return directory


def test_evaluate_prints_a_policys_hostile_reason_escaped_and_exits_normally(program_dir, monkeypatch):
    monkeypatch.setattr(evaluate, "_run", lambda *args, **kwargs: (hostile_evaluation(program_dir), {}))
    result = invoke_cli("evaluate", str(program_dir), "--benchmark", "cartpole", "--episodes", "2")
    assert result.exit_code == 0
    assert f"Episode 1: exception: {SHOWN}" in result.stdout
    assert "CartPole-v1 [/] · train · seed 0" in result.stdout
    assert "score (return [/]\\x1b]0;title\\x07): 1.5000" in result.stdout
    assert not any(c in result.stdout for c in "\x1b\x9b\u202e\r\x07")


def test_evaluate_says_a_hostile_program_file_name_escaped(program_dir):
    os.mkfifo(program_dir / "pipe [bold] \x1b[2J")  # a special file: the Program is refused, naming it
    result = invoke_cli("evaluate", str(program_dir), "--benchmark", "cartpole")
    # exit 1 is a SystemExit, no crash: invoke_cli raises any exception the command let escape
    assert result.exit_code == 1
    assert "invalid Program" in result.stderr and "pipe [bold] \\x1b[2J" in result.stderr
    assert "\x1b" not in result.stderr


# env test


def test_env_test_prints_hostile_check_details_escaped_and_exits_with_the_checks_verdict(monkeypatch):
    report = EnvReport(image="env-x:1 [/]", image_id="sha256:" + "0" * 64, benchmarks=("X-v0 [/]",), checks=(
        EnvCheck(benchmark="X-v0 [/]", name="plans [/] episodes", ok=True),
        EnvCheck(benchmark="X-v0 [/]", name="baseline runs", ok=False, detail=f"Episode 0: exception: {HOSTILE}"),
    ))
    # The command imports both when it runs (not with --help): patched where they live.
    monkeypatch.setattr("orchestrator.backends.engine.DockerEngine.connect", staticmethod(lambda: object()))
    monkeypatch.setattr("orchestrator.envcheck.check_environment", lambda *args, **kwargs: report)
    result = invoke_cli("env", "test", "env-x:1")
    # a failed check exits 1 (SystemExit), no crash: invoke_cli raises any exception the command let escape
    assert result.exit_code == 1
    assert f"Episode 0: exception: {SHOWN}" in result.stdout
    assert "plans [/] episodes" in result.stdout and "X-v0 [/] in env-x:1 [/]" in result.stdout
    assert not any(c in result.stdout for c in "\x1b\x9b\u202e\r")


def test_every_commands_error_line_prints_outside_text_plainly_and_exits_with_its_code(capsys):
    import typer

    from orchestrator.cli.common import ExitCode, fail

    with pytest.raises(typer.Exit) as ended:
        fail(f"bad spec: {HOSTILE}", problems=[f"relay.upstream: {HOSTILE}"])
    assert ended.value.exit_code == ExitCode.BAD_INPUT
    printed = capsys.readouterr().err
    assert f"error: bad spec: {SHOWN}" in printed
    assert f"  relay.upstream: {SHOWN}" in printed
    assert "\x1b" not in printed and "\x9b" not in printed
