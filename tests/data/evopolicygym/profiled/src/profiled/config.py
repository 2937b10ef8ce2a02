"""The typed configuration choosing one of the Benchmark's profiles."""

from __future__ import annotations

from dataclasses import dataclass

PROFILES = ("calm", "breezy", "stormy")

# profile -> (horizon, drift per step, noise amplitude)
PROFILE_PARAMETERS: dict[str, tuple[int, float, float]] = {
    "calm": (10, 0.0, 0.05),
    "breezy": (20, 0.1, 0.1),
    "stormy": (30, 0.3, 0.2),
}


@dataclass(frozen=True, slots=True)
class ProfiledConfig:
    """Which profile a ProfiledBenchmark plays (one of PROFILES; the first by default)."""

    profile: str = PROFILES[0]

    def __post_init__(self) -> None:
        if type(self.profile) is not str:
            raise TypeError("profile must be an exact string")
        if self.profile not in PROFILES:
            raise ValueError("profile must be one of: " + ", ".join(PROFILES))

    @property
    def horizon(self) -> int:
        return PROFILE_PARAMETERS[self.profile][0]

    @property
    def drift(self) -> float:
        return PROFILE_PARAMETERS[self.profile][1]

    @property
    def noise(self) -> float:
        return PROFILE_PARAMETERS[self.profile][2]


__all__ = ["PROFILES", "ProfiledConfig"]
