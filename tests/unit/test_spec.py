"""Run spec files: validation with field paths, unknown keys refused, defaults a user would expect, the JSON Schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import invoke_cli

from orchestrator.run.spec import RunSpec, SpecError, json_schema, load_spec

REPO = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return path


def test_the_example_spec_is_valid_and_fills_defaults():
    spec, text = load_spec(REPO / "examples" / "cartpole.yaml")
    assert spec.agent.kind == "hill-climb" and spec.budget.episodes == 96
    assert spec.limits.step_deadline_s == 1.0 and spec.sandbox.concurrency == 0
    assert text == (REPO / "examples" / "cartpole.yaml").read_text()


def test_every_error_is_reported_with_its_field_path(tmp_path):
    path = write(tmp_path, "benchmark: cartpole\nagent: {kind: hill-climb, step_siz: 1}\nbudget: {episodes: 0}\ncolour: blue\n")
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    assert sorted(caught.value.problems) == [
        "agent.step_siz: unknown key",
        "budget.episodes: Input should be greater than or equal to 1",
        "colour: unknown key",
    ]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("benchmark: x\n", "agent: Field required"),
        ("benchmark: x\nagent: {kind: psychic}\n", "agent: Input tag 'psychic'"),
        ("- a\n- b\n", "the spec must be a mapping"),
        ("benchmark: [unclosed\n", "2:1: expected ',' or ']'"),
        ("benchmark: CartPole-v1\nagent: {kind: scripted\n  steps: x: y\n", "3:8: expected ',' or '}', but got ':'"),
        ("benchmark: x\nagent: {kind: codex}\n", "agent.model: Field required"),
        ("benchmark: x\nagent: {kind: hill-climb}\nbudget: {episodes: 4, max_episodes_per_submission: 8}\n",
         "max_episodes_per_submission exceeds budget.episodes"),
    ],
)
def test_invalid_specs_say_what_is_wrong(tmp_path, text, problem):
    with pytest.raises(SpecError) as caught:
        load_spec(write(tmp_path, text))
    assert any(problem in line for line in caught.value.problems), caught.value.problems


def test_json_schema_describes_every_top_level_key():
    schema = json_schema()
    assert set(schema["properties"]) == set(RunSpec.model_fields)
    assert schema["additionalProperties"] is False
    json.dumps(schema)


def test_spec_check_prints_one_line_per_problem_and_fails(tmp_path):
    path = write(tmp_path, "benchmark: cartpole\nagent: {kind: scripted, steps: []}\nseed: -1\n")
    result = invoke_cli("spec", "check", str(path))
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 2 and all(line.startswith(f"{path}: ") for line in lines)
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("url", [
    "api.openai.com",                           # no scheme
    "ftp://api.openai.com",
    "https://user@collector.example",           # userinfo: which host would a reader take?
    "https://api.openai.com\\@collector.example",
    "https://collector.example#@api.openai.com",
    "https://collector.example?@api.openai.com",
    "https://api.openai.com /v1",
    "https:///v1",
    "https://:8443",
    "https://collector.example:99999",
])
def test_relay_urls_are_plain_so_that_no_reader_takes_another_host_out_of_them(tmp_path, url):
    for key in ("upstream", "refresh_url"):
        relay = f"{{login: codex, {key}: '{url}'}}" if key == "refresh_url" else f"{{{key}: '{url}'}}"
        with pytest.raises(SpecError) as caught:
            load_spec(write(tmp_path, f"benchmark: CartPole-v1\nagent: {{kind: codex, model: m}}\nrelay: {relay}\n"))
        assert [problem.split(":")[0] for problem in caught.value.problems] == [f"relay.{key}"], caught.value.problems
    spec, _ = load_spec(write(tmp_path, "benchmark: CartPole-v1\nagent: {kind: codex, model: m}\n"
                                        "relay: {upstream: 'http://127.0.0.1:8000/v1', credential_env: MY_KEY}\n"))
    assert spec.relay.upstream == "http://127.0.0.1:8000/v1" and spec.relay.granted == ()
