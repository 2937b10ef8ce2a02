"""Baseline CartPole-v1 Program: a linear threshold rule whose weights live in params.json."""

from __future__ import annotations

import json
from typing import Any

import numpy as np


class LinearThresholdPolicy:
    """Push right (1) when ``weights . observation + bias > 0``, else push left (0)."""

    def __init__(self, weights: np.ndarray, bias: float) -> None:
        self._weights = weights
        self._bias = bias

    def act(self, observation: np.ndarray) -> int:
        score = float(np.dot(self._weights, np.asarray(observation, dtype=np.float64))) + self._bias
        return 1 if score > 0.0 else 0


def make_policy(context: Any) -> LinearThresholdPolicy:
    """Build the policy from params.json: ``weights`` (one per observation component) and ``bias``."""
    params = json.loads((context.program_dir / "params.json").read_text(encoding="utf-8"))
    weights = np.asarray(params["weights"], dtype=np.float64)
    expected = tuple(context.observation_space["shape"])
    if weights.shape != expected:
        raise ValueError(f"params.json weights have shape {weights.shape}, expected {expected}")
    return LinearThresholdPolicy(weights, float(params.get("bias", 0.0)))
