"""Rendered replays: a contact sheet (one PNG of up to nine frames) of the Episode at plan index 0.

MuJoCo renders offscreen through OpenGL. The image carries Debian's libosmesa6 (software
rendering, no GPU, no display), and this module selects it with MUJOCO_GL=osmesa before MuJoCo
is imported. Where the library is missing, or MUJOCO_GL names a backend that fails, the Episode
runs as usual and its summary says why it has no replay.
"""

from __future__ import annotations

import ctypes.util
import io
import os
from typing import Any

import numpy as np

REPLAY_ARTIFACT = "replay.png"
FRAMES = 9  # the sheet is 3 x 3: the state after reset, seven between, the last
COLUMNS = 3
FRAME_PIXELS = 160
REPLAY_LIMIT_BYTES = 256 * 1024  # a sheet larger than this is left out (and the summary says so)


def _select_backend() -> str | None:
    """The offscreen backend MuJoCo will use: MUJOCO_GL when set, else osmesa when libOSMesa is installed, else None."""
    chosen = os.environ.get("MUJOCO_GL")
    if chosen:
        return chosen
    if ctypes.util.find_library("OSMesa"):
        os.environ["MUJOCO_GL"] = "osmesa"
        os.environ.setdefault("PYOPENGL_PLATFORM", "osmesa")
        return "osmesa"
    return None


BACKEND = _select_backend()  # at import, before anything imports mujoco
NO_BACKEND = ("no offscreen renderer: this image has no libOSMesa (Debian's libosmesa6) and MUJOCO_GL is not set; "
              "the Episodes run as usual without a replay")


class Replay:
    """Frames of one Episode taken every `every` = ceil(horizon / 8) steps and after the last step, rendered small; at most FRAMES.

    Construction never raises: a renderer that cannot start leaves `problem` set and takes no frames.
    """

    def __init__(self, env: Any, horizon: int) -> None:
        self.every = max(1, -(-horizon // (FRAMES - 1)))  # so that the last step's frame is the ninth at most
        self.problem = "" if BACKEND else NO_BACKEND
        self._frames: list[tuple[int, np.ndarray]] = []
        self._renderer = None
        if not self.problem:
            try:
                self._renderer = _renderer(env)
            except Exception as exc:  # the library's own errors (missing symbols, no context, ...)
                self.problem = _problem(exc)

    def capture(self, step: int) -> None:
        """Take a frame of the current state (after `step` steps) unless one was taken there or the sheet is full."""
        if self._renderer is None or (self._frames and self._frames[-1][0] == step) or len(self._frames) >= FRAMES:
            return
        try:
            self._frames.append((step, np.asarray(self._renderer.render("rgb_array"), dtype=np.uint8).copy()))
        except Exception as exc:
            self.problem, self._frames = _problem(exc), []
            self.close()

    def close(self) -> None:
        if self._renderer is not None:
            renderer, self._renderer = self._renderer, None
            try:
                renderer.close()
            except Exception:
                pass  # a renderer that cannot close leaves nothing the Episode needs

    def summary(self) -> dict[str, Any]:
        """What the Episode's summary says of its replay: the frames' steps, or why there is none."""
        if self.problem:
            return {"available": False, "reason": self.problem}
        return {"available": True, "artifact": REPLAY_ARTIFACT, "frame_steps": [step for step, _ in self._frames]}

    def artifacts(self) -> dict[str, bytes]:
        """{REPLAY_ARTIFACT: PNG} when frames were taken and the sheet fits REPLAY_LIMIT_BYTES, else {} (and `problem` says why)."""
        if self.problem or not self._frames:
            return {}
        sheet = contact_sheet(self._frames)
        if len(sheet) > REPLAY_LIMIT_BYTES:
            self.problem = f"the replay sheet took {len(sheet)} bytes, over {REPLAY_LIMIT_BYTES}"
            return {}
        return {REPLAY_ARTIFACT: sheet}


def contact_sheet(frames: list[tuple[int, np.ndarray]]) -> bytes:
    """One palette PNG: the frames in rows of COLUMNS, each labelled with its step."""
    from PIL import Image, ImageDraw

    rows = -(-len(frames) // COLUMNS)
    sheet = Image.new("RGB", (COLUMNS * FRAME_PIXELS, rows * FRAME_PIXELS))
    draw = ImageDraw.Draw(sheet)
    for position, (step, pixels) in enumerate(frames):
        x, y = (position % COLUMNS) * FRAME_PIXELS, (position // COLUMNS) * FRAME_PIXELS
        sheet.paste(Image.fromarray(pixels).resize((FRAME_PIXELS, FRAME_PIXELS)), (x, y))
        draw.text((x + 4, y + 2), f"t={step}", fill=(255, 255, 255))
    out = io.BytesIO()
    sheet.quantize(colors=128).save(out, format="PNG", optimize=True)
    return out.getvalue()


def _renderer(env: Any) -> Any:
    """A small offscreen renderer with the environment's own camera (shadows and reflections off: four times cheaper)."""
    import mujoco
    from gymnasium.envs.mujoco.mujoco_rendering import MujocoRenderer

    own = env.mujoco_renderer
    renderer = MujocoRenderer(env.model, env.data, own.default_cam_config, FRAME_PIXELS, FRAME_PIXELS, camera_id=own.camera_id)
    renderer.render("rgb_array")  # creates the context now: a failing backend fails here, not mid-Episode
    for flag in (mujoco.mjtRndFlag.mjRND_SHADOW, mujoco.mjtRndFlag.mjRND_REFLECTION):
        renderer.viewer.scn.flags[flag] = False
    return renderer


def _problem(exc: BaseException) -> str:
    return f"the {BACKEND} renderer failed: {type(exc).__name__}: {str(exc)[:200]}"
