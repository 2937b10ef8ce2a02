"""Baseline Acrobot-v1 Program: a deadbanded linear torque rule whose numbers live in params.json."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

# Action indices of the Discrete(3) action space.
TORQUE_NEGATIVE = 0
TORQUE_ZERO = 1
TORQUE_POSITIVE = 2


class DeadbandTorquePolicy:
    """Apply torque along the sign of ``u = gain * (weights . observation)``.

    Torque +1 when u > deadband, -1 when u < -deadband, none in between. The
    starting weights push against the first link's angular velocity, which
    pumps energy into the swing; a small gain leaves the rule idle near rest.
    """

    def __init__(self, weights: np.ndarray, gain: float, deadband: float) -> None:
        self._weights = weights
        self._gain = gain
        self._deadband = deadband

    def act(self, observation: np.ndarray) -> int:
        u = self._gain * float(np.dot(self._weights, np.asarray(observation, dtype=np.float64)))
        if u > self._deadband:
            return TORQUE_POSITIVE
        if u < -self._deadband:
            return TORQUE_NEGATIVE
        return TORQUE_ZERO


def make_policy(context: Any) -> DeadbandTorquePolicy:
    """Build the policy from params.json: ``weights`` (one per observation component), ``gain``, ``deadband``."""
    params = json.loads((context.program_dir / "params.json").read_text(encoding="utf-8"))
    weights = np.asarray(params["weights"], dtype=np.float64)
    expected = tuple(context.observation_space["shape"])
    if weights.shape != expected:
        raise ValueError(f"params.json weights have shape {weights.shape}, expected {expected}")
    return DeadbandTorquePolicy(weights, float(params["gain"]), float(params.get("deadband", 0.0)))
