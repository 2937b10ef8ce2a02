"""Baseline Probe Program: answer step_index % 3, read from the first observation component."""

from __future__ import annotations

from typing import Any

import numpy as np

PERIOD = 3


class StepModuloPolicy:
    """Return ``int(observation[0]) % 3``, the rewarded action at every step."""

    def act(self, observation: np.ndarray) -> int:
        return round(float(observation[0])) % PERIOD


def make_policy(context: Any) -> StepModuloPolicy:
    """Build the policy; it needs nothing from the context."""
    return StepModuloPolicy()
