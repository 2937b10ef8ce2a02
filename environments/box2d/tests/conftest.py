"""Test configuration: makes this package importable from a source checkout without installing it."""

from __future__ import annotations

import sys
from pathlib import Path

# The import package sits at the package root, one level above tests/. An
# installed copy (pip install -e) resolves to the same files.
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[1])
if _PACKAGE_ROOT not in sys.path:
    sys.path.insert(0, _PACKAGE_ROOT)
