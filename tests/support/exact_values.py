"""Where tests import `evopolicygym` from: compat/ when it is in the tree, else the test-only stand-in."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
STAND_IN = Path(__file__).resolve().parent / "evopolicygym_stand_in"


def evopolicygym_root() -> Path:
    """The directory to put on sys.path / PYTHONPATH so that `import evopolicygym.policy` works."""
    compat = REPO / "compat"
    return compat if (compat / "evopolicygym" / "policy.py").is_file() else STAND_IN
