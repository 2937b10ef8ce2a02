"""The containers an action created, seen through a subscription to the engine's events held open through it.

A query for past events (`since=...`) is answered from the daemon's in-memory log of its last 256 events only. A busy
test run (other workers' containers, every `docker exec` an event too) overflows that log within seconds, and a
query made after the action then misses what it created. A subscription opened before the action sees every event.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import docker

from orchestrator.backends.labels import MANAGED

_FILTERS = {"type": "container", "event": "create", "label": [f"{MANAGED}=true"]}


class ContainerCreations:
    """`with ContainerCreations(client) as created:` ... `created.labelled(sandbox_label=value)`: the create events of
    managed containers during the block."""

    def __init__(self, client: docker.DockerClient) -> None:
        self._client = client
        self._events: list[dict[str, Any]] = []
        self._stream: Any = None
        self._reader: threading.Thread | None = None

    def __enter__(self) -> ContainerCreations:
        self._stream = self._client.events(filters=_FILTERS, decode=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        try:
            for event in self._stream:
                self._events.append(event)
        except Exception:  # the stream closed under the reader at __exit__
            pass

    def __exit__(self, *exc_info: object) -> None:
        # A bounded query ending a second from now returns only once that second has passed: every event the block
        # caused was published before it began, so by the time it returns the open subscription has been sent them too.
        now = int(time.time())
        list(self._client.events(since=now, until=now + 1, filters=_FILTERS, decode=True))
        self._stream.close()
        assert self._reader is not None
        self._reader.join(timeout=10)

    def labelled(self, **labels: str) -> list[dict[str, Any]]:
        """The create events whose container carried every label given (full label keys to values)."""
        return [event for event in self._events
                if all(event.get("Actor", {}).get("Attributes", {}).get(key) == value for key, value in labels.items())]
