"""Length-prefixed protobuf frames over a stream socket.

A frame is a 4-byte little-endian unsigned length, then that many bytes of one
serialized message. Reads are buffered so that a small frame costs one recv().
"""

from __future__ import annotations

import socket
import struct
import time
from typing import TypeVar

from google.protobuf.message import DecodeError, Message

HEADER = struct.Struct("<I")
_TIMEVAL = struct.Struct("@ll")
DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024
_READ_CHUNK = 1 << 16

M = TypeVar("M", bound=Message)


class FramingError(Exception):
    """The peer broke the framing rules: oversized frame or undecodable message."""


class PeerClosed(Exception):
    """The peer closed the connection (possibly in the middle of a frame)."""


class FrameTimeout(Exception):
    """No complete frame arrived before the deadline."""


class FramedSocket:
    """Send and receive length-prefixed messages on a connected stream socket.

    The socket stays in blocking mode; deadlines use the kernel's receive
    timeout (SO_RCVTIMEO), changed only when the remaining time differs, so a
    step costs one recv() and no poll() in the common case.
    """

    def __init__(self, sock: socket.socket, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        sock.settimeout(None)
        self._sock = sock
        self._max = max_frame_bytes
        self._buffer = bytearray()
        self._timeout: float | None = None

    @property
    def socket(self) -> socket.socket:
        return self._sock

    def send(self, message: Message) -> None:
        """Send one message. Raises PeerClosed when the peer has gone."""
        data = message.SerializeToString()
        try:
            self._sock.sendall(HEADER.pack(len(data)) + data)
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise PeerClosed(str(exc)) from exc

    def receive(self, message: M, deadline: float | None = None) -> M:
        """Fill message with the next frame and return it.

        deadline is a time.monotonic() instant, or None to wait forever.
        Raises FrameTimeout, PeerClosed, or FramingError (oversized frame,
        undecodable bytes).
        """
        body = self.receive_bytes(deadline)
        try:
            message.ParseFromString(body)
        except DecodeError as exc:
            raise FramingError(f"undecodable frame: {exc}") from exc
        return message

    def receive_bytes(self, deadline: float | None = None) -> bytes:
        """Return the body of the next frame. Raises like receive()."""
        buffer = self._buffer
        while True:
            if len(buffer) >= HEADER.size:
                (length,) = HEADER.unpack_from(buffer)
                if length > self._max:
                    raise FramingError(f"frame of {length} bytes exceeds the limit of {self._max}")
                end = HEADER.size + length
                if len(buffer) >= end:
                    body = bytes(buffer[HEADER.size:end])
                    del buffer[:end]
                    return body
            self._fill(deadline)

    def _fill(self, deadline: float | None) -> None:
        if deadline is None:
            self._set_timeout(None)
        else:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise FrameTimeout("deadline passed")
            # Round the kernel timeout up to a millisecond so that it rarely changes.
            self._set_timeout(max(0.001, -(-remaining // 0.001) * 0.001))
        try:
            chunk = self._sock.recv(_READ_CHUNK)
        except (BlockingIOError, socket.timeout) as exc:
            if deadline is None or time.monotonic() >= deadline:
                raise FrameTimeout("deadline passed") from exc
            return  # woke a little early: wait again for the rest
        except ConnectionResetError as exc:
            raise PeerClosed(str(exc)) from exc
        if not chunk:
            raise PeerClosed("connection closed" + (" mid-frame" if self._buffer else ""))
        self._buffer += chunk

    def _set_timeout(self, seconds: float | None) -> None:
        if seconds == self._timeout:
            return
        whole = 0 if seconds is None else int(seconds)
        micros = 0 if seconds is None else int((seconds - whole) * 1_000_000)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, _TIMEVAL.pack(whole, micros))
        self._timeout = seconds

    def close(self) -> None:
        self._sock.close()
