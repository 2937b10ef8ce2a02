"""Fresh virtual environments for the packaging tests: made with `python -m venv`, filled from local wheels only."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Everything the SDK, an environment package, the orchestrator and pytest need, pinned as the packages pin them.
WHEEL_REQUIREMENTS = (
    "numpy==2.4.6",
    "protobuf==7.36.2",
    "gymnasium==1.4.0",
    "grpcio==1.85.3",
    "httpx>=0.28",
    "matplotlib>=3.8",  # the orchestrator's runs report
    "docker>=7.1",
    "matplotlib>=3.8",
    "pydantic>=2.7",
    "pyyaml>=6",
    "rich>=13",
    "typer>=0.12",
    "pytest>=8",
    "setuptools>=68",
    "wheel",
)


@dataclass
class Venv:
    """A fresh virtual environment; `timings` records how long each step took (seconds)."""

    root: Path
    wheels: Path
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    def run(self, *args: str | Path, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """Run a command with this venv's bin/ first on PATH and nothing of the caller's Python setup."""
        env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTHON", "VIRTUAL_ENV", "PIP_"))}
        env["PATH"] = f"{self.root / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
        return subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)

    def pip_install(self, *targets: str | Path, step: str) -> None:
        started = time.monotonic()
        result = self.run(self.python, "-m", "pip", "install", "--quiet", "--no-index", "--find-links", self.wheels, *targets)
        self.timings[step] = time.monotonic() - started
        assert result.returncode == 0, f"pip install {targets} failed:\n{result.stdout}\n{result.stderr}"


def wheel_dir() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "epg-orchestrator" / "test-wheels"


def make_venv(root: Path, wheels: Path) -> Venv:
    """Create a fresh venv at root (no system site-packages)."""
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True, capture_output=True, timeout=120)
    venv = Venv(root=root, wheels=wheels)
    venv.timings["venv"] = time.monotonic() - started
    config = (root / "pyvenv.cfg").read_text()
    assert "include-system-site-packages = false" in config
    return venv


def copy_sources(destination: Path, *names: str) -> Path:
    """Copy parts of the repository (no caches, no build outputs) to destination; return it."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build", "dist", ".*")
    for name in names:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, destination / name, ignore=ignore)
        else:
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name)
    return destination
