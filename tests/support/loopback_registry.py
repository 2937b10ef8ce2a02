"""Debian's `docker-registry` served on 127.0.0.1 for the tests that push and pull: installed when it is missing
(CI runs as root on a fresh machine), with its storage in a temporary directory, stopped at the end. When it cannot
be installed or started the test fails with the reason."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest


def registry_binary() -> str:
    """The path of docker-registry, installed with apt-get when it is missing (as root); fails the test otherwise."""
    found = shutil.which("docker-registry")
    if found:
        return found
    if os.geteuid() != 0:
        pytest.fail("Debian's docker-registry is not installed and only root can install it (apt-get install docker-registry)", pytrace=False)
    for command in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "docker-registry"]):
        done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
        if done.returncode != 0:
            pytest.fail(f"{' '.join(command)} failed: {done.stderr[-2000:]}", pytrace=False)
    return shutil.which("docker-registry") or pytest.fail("docker-registry is still missing after apt-get install", pytrace=False)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _answers(address: str) -> bool:
    try:
        with urllib.request.urlopen(f"http://{address}/v2/", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


@contextmanager
def serving_registry(directory: Path) -> Iterator[str]:
    """Serve a registry on 127.0.0.1:PORT with its storage below directory; yield HOST:PORT."""
    binary = registry_binary()
    address = f"127.0.0.1:{free_port()}"
    config = directory / "config.yml"
    config.write_text(
        "version: 0.1\n"
        "log: {level: warn}\n"
        f"storage: {{filesystem: {{rootdirectory: {directory / 'data'}}}, delete: {{enabled: true}}}}\n"
        f"http: {{addr: {address}}}\n"
    )
    log = open(directory / "registry.log", "wb")
    process = subprocess.Popen([binary, "serve", str(config)], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while not _answers(address):
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"docker-registry did not serve on {address}: {(directory / 'registry.log').read_text()[-2000:]}", pytrace=False)
            time.sleep(0.2)
        yield address
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
