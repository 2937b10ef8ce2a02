"""Deterministic Episode seed planning with disjoint splits, and the policy seed of an Episode."""

from __future__ import annotations

import hashlib

SPLITS = ("train", "validation", "test")
_SEED_SPACE = 2**31


def plan_seeds(split: str, seed: int, count: int) -> list[int]:
    """Return count distinct environment seeds for split, determined by seed.

    Seeds of different splits never coincide, whatever their run seeds: a seed
    of split number k is congruent to k modulo 3. Raises ValueError for an
    unknown split or a negative count.
    """
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {', '.join(SPLITS)}")
    if count < 0:
        raise ValueError("count must not be negative")
    offset = SPLITS.index(split)
    seeds: list[int] = []
    seen: set[int] = set()
    counter = 0
    while len(seeds) < count:
        digest = hashlib.sha256(f"epg-plan:{split}:{seed}:{counter}".encode()).digest()
        counter += 1
        base = int.from_bytes(digest[:8], "little") % _SEED_SPACE
        env_seed = 3 * base + offset
        if env_seed not in seen:
            seen.add(env_seed)
            seeds.append(env_seed)
    return seeds


def policy_seed(seed: int, split: str, index: int) -> int:
    """Return the policy seed of Episode index of split under seed (a 63-bit integer)."""
    digest = hashlib.sha256(f"epg-policy-seed:{seed}:{split}:{index}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1
