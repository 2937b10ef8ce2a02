"""The relay's side of the agent's connections: a Unix socket only its owner can connect to, a bounded number of
connection threads, and reads that time out (idle between requests, and a deadline for each request's head and body)."""

from __future__ import annotations

import io
import logging
import os
import socket
import socketserver
import threading
import time
from pathlib import Path
from typing import Any, Callable

log = logging.getLogger(__name__)

SOCKET_MODE = 0o600


class RequestTimeout(TimeoutError):
    """A request's head or body did not arrive within its deadline."""


class HeadTooLarge(ValueError):
    """A request's line and headers are longer than the bound."""


class DeadlineReader(io.RawIOBase):
    """The raw reads of one agent connection.

    Between requests a read waits at most idle_s. Once a request has begun (begin_request), every read until its
    body is read (end_request) shares one deadline, so a request sent a byte at a time still ends; until the body
    begins (begin_body) at most head_limit bytes are read (plus one read-ahead buffer).
    """

    def __init__(self, connection: socket.socket, idle_s: float) -> None:
        self._connection = connection
        self._idle_s = idle_s
        self._deadline: float | None = None
        self._head_limit: int | None = None
        self.read_bytes = 0  # since the request began
        self.timed_out = False  # this request passed its deadline

    def readable(self) -> bool:
        return True

    def begin_request(self, read_s: float, head_limit: int) -> None:
        self._deadline, self._head_limit, self.read_bytes = time.monotonic() + read_s, head_limit, 0
        self.timed_out = False

    def begin_body(self) -> None:
        self._head_limit = None

    def end_request(self) -> None:
        """Back to the idle wait; sends to the agent may block at most idle_s each."""
        self._deadline = self._head_limit = None
        self._connection.settimeout(self._idle_s)

    # buffer: typeshed's WriteableBuffer, a name only its private _typeshed module has (no import of it here).
    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]
        if self._deadline is None:
            self._connection.settimeout(self._idle_s)
        else:
            remaining = self._deadline - time.monotonic()
            if remaining <= 0:
                self.timed_out = True
                raise RequestTimeout("the request did not arrive in time")
            self._connection.settimeout(remaining)
        try:
            count = self._connection.recv_into(buffer)
        except TimeoutError:
            if self._deadline is not None:
                self.timed_out = True
                raise RequestTimeout("the request did not arrive in time") from None
            raise
        self.read_bytes += count
        if self._head_limit is not None and self.read_bytes > self._head_limit + io.DEFAULT_BUFFER_SIZE:
            raise HeadTooLarge(f"request head over {self._head_limit} bytes")
        return count


class SocketWriter(io.BufferedIOBase):
    """Writes straight to the connection (sendall), so a streamed chunk leaves at once."""

    def __init__(self, connection: socket.socket) -> None:
        self._connection = connection

    def writable(self) -> bool:
        return True

    # data: typeshed's ReadableBuffer, a name only its private _typeshed module has (no import of it here).
    def write(self, data) -> int:  # type: ignore[no-untyped-def]
        self._connection.sendall(data)
        with memoryview(data) as view:
            return view.nbytes


class BoundedUnixServer(socketserver.UnixStreamServer):
    """A Unix socket server with one thread per connection and at most max_connections of them.

    The socket is made mode 0600 and given to owner_uid (None: the Host's own uid) before it listens, so only that
    uid (and root) can connect. A connection beyond the cap is closed at once and reported to on_refused.
    """

    request_queue_size = 64

    def __init__(self, path: Path, handler: type[socketserver.BaseRequestHandler], *, max_connections: int,
                 owner_uid: int | None, on_refused: Callable[[], None]) -> None:
        # Bound through its directory's descriptor: a Unix socket address holds 107 bytes, and a Run directory below a
        # deep checkout is longer than that.
        directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        bound = f"/proc/self/fd/{directory}/{path.name}"
        super().__init__(bound, handler, bind_and_activate=False)
        self._max_connections = max_connections
        self._on_refused = on_refused
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        try:
            self.server_bind()
            os.chmod(bound, SOCKET_MODE)  # not yet listening: nobody can connect before this holds
            if owner_uid is not None and owner_uid != os.geteuid():
                os.chown(path.name, owner_uid, -1, dir_fd=directory, follow_symlinks=False)
            self.server_activate()
        except BaseException:
            self.server_close()
            raise
        finally:
            os.close(directory)

    @property
    def open_connections(self) -> int:
        with self._lock:
            return len(self._open)

    # request: typeshed types it as a socket or a datagram's (bytes, socket); a stream server's is always the socket.
    def process_request(self, request, client_address) -> None:  # type: ignore[no-untyped-def]
        with self._lock:
            admitted = len(self._open) < self._max_connections
            if admitted:
                self._open.add(request)
        if not admitted:
            self.shutdown_request(request)
            self._on_refused()
            return
        threading.Thread(target=self._serve, args=(request, client_address), name="epg-relay-connection", daemon=True).start()

    def _serve(self, request: socket.socket, client_address: Any) -> None:  # Any: what socketserver's stubs say of an address
        try:
            self.finish_request(request, client_address)
        except Exception as exc:  # an agent's connection that broke: nothing of the Host's is at fault
            log.debug("relay: connection ended: %r", exc)
        finally:
            with self._lock:
                self._open.discard(request)
            self.shutdown_request(request)

    def handle_error(self, request: socket.socket | tuple[bytes, socket.socket], client_address: Any) -> None:
        log.debug("relay: connection failed", exc_info=True)

    def close_connections(self) -> None:
        """Shut every open connection down, so their threads end."""
        with self._lock:
            open_now = list(self._open)
        for connection in open_now:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed by its own thread
