"""`images pull --pushed FILE`: the file is the push's --json output, read before any engine is asked."""

from __future__ import annotations

import json

import pytest
from support.cli import invoke_cli

from orchestrator.images.registry import RegistryError

ID = "sha256:" + "ab" * 32


@pytest.mark.parametrize(("content", "problem"), [
    ("not json", "JSONDecodeError"),
    (json.dumps({"registry": "r:5000"}), "KeyError"),
    (json.dumps({"images": [{"name": "policy-runtime"}]}), "KeyError"),
    (json.dumps({"images": [{"name": "policy-runtime", "id": "sha256:../../x"}]}), "an image id is not sha256:<64 hex digits>"),
    ("[" * (1 << 20) + "]", "over 1048576 bytes"),
])
def test_a_pushed_file_that_is_not_a_pushs_output_is_refused_before_anything_is_pulled(tmp_path, content, problem):
    pushed = tmp_path / "pushed.json"
    pushed.write_text(content)
    result = invoke_cli("images", "pull", "--registry", "127.0.0.1:1", "--pushed", str(pushed))
    assert result.exit_code == 1, result.stdout + result.stderr
    assert f"--pushed {pushed}" in result.stderr and problem in result.stderr


def test_a_pull_without_the_pushed_file_says_it_trusts_the_registrys_tags(monkeypatch):
    def no_engine(base, environments):
        raise RegistryError("no engine in this test")

    monkeypatch.setattr("orchestrator.cli.images._builder", no_engine)
    result = invoke_cli("images", "pull", "--registry", "127.0.0.1:1")
    assert result.exit_code == 3 and "no engine in this test" in result.stderr
    assert "pulling by tag: give --pushed FILE" in result.stderr
