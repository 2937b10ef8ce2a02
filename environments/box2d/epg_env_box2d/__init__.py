"""gymnasium's Box2D BipedalWalker-v3 and CarRacing-v3 behind the epg SDK: two Benchmarks of one package.

CarRacing-v3 imports pygame (it draws its own 96x96 observation on in-memory surfaces), and
pygame prints a banner on stdout unless PYGAME_HIDE_SUPPORT_PROMPT is set. The conformance
checks print their report on stdout, and nothing of this package may write there, so the
variable is set here, first, before any submodule imports gymnasium's Box2D environments.
SDL_VIDEODRIVER=dummy keeps SDL from looking for a display should anything initialise it.
"""

from __future__ import annotations

import os

os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")

from epg_env_box2d.bipedal import (  # noqa: E402  (after the variables above, on purpose)
    BIPEDAL_FAILURE_RETURN,
    BIPEDAL_HORIZON,
    BIPEDAL_ID,
    make_bipedal_benchmark,
)
from epg_env_box2d.carracing import (  # noqa: E402
    CARRACING_FAILURE_RETURN,
    CARRACING_HORIZON,
    CARRACING_ID,
    make_carracing_benchmark,
)

__all__ = [
    "BIPEDAL_FAILURE_RETURN",
    "BIPEDAL_HORIZON",
    "BIPEDAL_ID",
    "CARRACING_FAILURE_RETURN",
    "CARRACING_HORIZON",
    "CARRACING_ID",
    "make_bipedal_benchmark",
    "make_carracing_benchmark",
]
