"""The pytest plugin's own containers against the real engine: hardened like the sandbox's, removed, and started without
changing testcontainers' configuration (nor starting its Ryuk reaper) for the rest of the author's session."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

from orchestrator.backends.labels import LabelSet, owner_id, selector
from orchestrator.pytest_plugin import _run_in_image, _Session

BROKEN_PACKAGE = Path(__file__).resolve().parents[1] / "environments" / "broken"
# The session's state seen from an author's test module: testcontainers' configuration (every field, the cached ones
# too), the environment, and whether Ryuk was started. A fresh process, so that nothing else has touched them.
AUTHOR_MODULE = '''\
import copy
import os

from testcontainers.core.config import testcontainers_config
from testcontainers.core.container import Reaper


def _state():
    return copy.deepcopy(vars(testcontainers_config)), {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}


BEFORE = _state()


def test_checks_leave_testcontainers_as_they_found_it(epg_environment, _epg_session):
    print("EPG-SANDBOX", _epg_session.labels.sandbox)
    assert epg_environment.benchmarks == ("Broken-v0",) and not epg_environment.ok
    configuration, environment = _state()
    assert configuration == BEFORE[0]
    assert environment == BEFORE[1]
    assert Reaper._instance is None
'''
PROBE = """\
import json, os
status = dict(line.split(":\\t", 1) for line in open("/proc/self/status").read().splitlines() if ":\\t" in line)
try:
    open("/written", "w")
    root = "writable"
except OSError as exc:
    root = type(exc).__name__
interfaces = [line.split(":")[0].strip() for line in open("/proc/net/dev").read().splitlines()[2:]]
print(json.dumps({"uid": os.getuid(), "root": root, "interfaces": interfaces, "cap_eff": status["CapEff"].strip(),
                  "no_new_privs": status["NoNewPrivs"].strip()}))
"""


def test_the_plugin_changes_no_global_state_of_testcontainers_and_starts_no_ryuk(engine, tmp_path: Path):
    (tmp_path / "test_state.py").write_text(AUTHOR_MODULE)
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("TESTCONTAINERS_", "RYUK_"))}
    # testcontainers' defaults (Ryuk on); should anything start Ryuk after all, its image is a loopback address that
    # fails at once instead of a pull from a registry.
    environment["RYUK_CONTAINER_IMAGE"] = "127.0.0.1:9/epg-test/no-ryuk:never"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "--epg-package", str(BROKEN_PACKAGE), "test_state.py"],
        cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=900, check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "1 passed" in result.stdout
    (sandbox_id,) = [line.split()[-1] for line in result.stdout.splitlines() if line.startswith("EPG-SANDBOX")]
    assert engine.client.containers.list(all=True, filters={"label": selector(sandbox=sandbox_id)}, sparse=True) == []


def test_each_command_of_the_plugin_runs_in_a_hardened_container_that_is_removed(engine, images, scope):
    labels = LabelSet(sandbox=secrets.token_hex(6), owner=owner_id(), scope=scope)
    state = _Session(engine=engine, labels=labels, base="auto")

    status, stdout, both = _run_in_image(state, images["env-cartpole"], ("python3", "-c", PROBE), "env-check")

    assert status == 0, both
    seen = json.loads(stdout.strip().splitlines()[-1])
    assert seen == {"uid": 10001, "root": "OSError", "interfaces": ["lo"], "cap_eff": "0000000000000000", "no_new_privs": "1"}
    assert engine.client.containers.list(all=True, filters={"label": selector(sandbox=labels.sandbox)}, sparse=True) == []
