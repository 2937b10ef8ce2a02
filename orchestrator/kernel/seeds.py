"""Seeds derived from a Run or evaluation seed; the policy never learns how."""

from __future__ import annotations

import hashlib


def policy_seed(seed: int, split: str, index: int) -> int:
    """Return the policy seed of Episode index of split under seed (a 63-bit integer)."""
    digest = hashlib.sha256(f"epg-policy-seed:{seed}:{split}:{index}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def derive_seed(seed: int, purpose: str) -> int:
    """Return an independent seed for purpose ("validation", "assessment", ...) under seed."""
    digest = hashlib.sha256(f"epg-derived-seed:{seed}:{purpose}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1
