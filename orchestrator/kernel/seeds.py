"""Seeds derived from a Run or evaluation seed (and, for hidden Episodes, the Host's key); the policy never learns how."""

from __future__ import annotations

import hashlib
import hmac

MIN_KEY_BYTES = 32


def derive_seed(seed: int, purpose: str) -> int:
    """Return an independent seed for purpose under seed, from public code alone.

    Anyone who knows seed can compute it: hidden Episodes of a Run use keyed_seed.
    """
    digest = hashlib.sha256(f"epg-derived-seed:{seed}:{purpose}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def keyed_seed(key: bytes, seed: int, purpose: str) -> int:
    """Return the seed for purpose ("train", "validation", "assessment") under seed and key (a 63-bit integer).

    HMAC-SHA256 with the Host's secret key: the same key and seed always give the
    same result, and without the key the code and seed tell nothing about it.
    Raises ValueError when key is shorter than MIN_KEY_BYTES.
    """
    _check_key(key)
    digest = hmac.new(key, f"epg-keyed-seed:{seed}:{purpose}".encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def key_id(key: bytes) -> str:
    """Return a short public fingerprint of key ("k-" and 16 hex digits) that reveals nothing of it.

    Raises ValueError when key is shorter than MIN_KEY_BYTES.
    """
    _check_key(key)
    return "k-" + hashlib.sha256(b"epg-seed-key-id\0" + key).hexdigest()[:16]


def _check_key(key: bytes) -> None:
    if len(key) < MIN_KEY_BYTES:
        raise ValueError(f"a seed key has at least {MIN_KEY_BYTES} bytes, not {len(key)}")
