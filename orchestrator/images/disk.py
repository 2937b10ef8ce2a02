"""The disk a set of images takes: every layer counted once, however many images share it."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

History = Callable[[str], list[dict[str, Any]]]  # docker's image history, newest layer first (APIClient.history)


def disk_bytes(tags: Iterable[str], history: History) -> int:
    """The bytes of the union of the layers of tags.

    A layer is known by its history Id (each step of a local build has one); a layer
    without one (`<missing>`, as pulled images show) by the chain of steps below it.
    """
    sizes: dict[str, int] = {}
    for tag in tags:
        below = ""
        for entry in reversed(history(tag)):
            known = entry.get("Id") or "<missing>"
            key = known if known != "<missing>" else f"{below}\0{entry.get('CreatedBy', '')}\0{entry.get('Size', 0)}"
            sizes[key] = int(entry.get("Size") or 0)
            below = key
    return sum(sizes.values())
