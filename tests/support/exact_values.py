"""Where tests import `evopolicygym` from: our implementation of it in compat/."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def evopolicygym_root() -> Path:
    """The directory to put on sys.path / PYTHONPATH so that `import evopolicygym.policy` works."""
    return REPO / "compat"
