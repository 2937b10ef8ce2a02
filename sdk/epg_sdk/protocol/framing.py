"""Length-prefixed protobuf frames over a stream socket.

A frame is a 4-byte little-endian unsigned length, then that many bytes of one
serialized message. Reads are buffered so that a small frame costs one recv().
"""

from __future__ import annotations

import math
import socket
import struct
import time
from typing import TypeVar

from google.protobuf.message import DecodeError, Message

HEADER = struct.Struct("<I")
_TIMEVAL = struct.Struct("@ll")
DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024
# Non-sleeping receive attempts before poll(): about 100 to 300 microseconds.
STEP_SPIN = 0
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

    The socket stays in blocking mode and deadlines use the kernel's socket
    timeouts (SO_RCVTIMEO, SO_SNDTIMEO), set again only when the remaining
    time changes: a step costs one recv() and one send(), nothing else. With
    spin > 0, a receive first makes that many non-blocking attempts.
    """

    def __init__(self, sock: socket.socket, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES, spin: int = 0) -> None:
        sock.settimeout(None)
        self._sock = sock
        self._max = max_frame_bytes
        self._spin = spin
        self._buffer = bytearray()
        self._timeouts = {socket.SO_RCVTIMEO: 0.0, socket.SO_SNDTIMEO: 0.0}

    @property
    def socket(self) -> socket.socket:
        return self._sock

    def send(self, message: Message, deadline: float | None = None) -> None:
        """Send one message. Raises PeerClosed when the peer has gone, FrameTimeout
        when the peer does not take it before the deadline."""
        data = message.SerializeToString()
        self._arm(socket.SO_SNDTIMEO, deadline)
        try:
            self._sock.sendall(HEADER.pack(len(data)) + data)
        except (BlockingIOError, socket.timeout) as exc:
            raise FrameTimeout("the peer did not read before the deadline") from exc
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
        recv = self._sock.recv
        chunk = None
        try:
            for _ in range(self._spin):
                try:
                    chunk = recv(_READ_CHUNK, socket.MSG_DONTWAIT)
                    break
                except BlockingIOError:
                    continue
            if chunk is None:
                self._arm(socket.SO_RCVTIMEO, deadline)
                chunk = recv(_READ_CHUNK)
        except (BlockingIOError, socket.timeout) as exc:
            if deadline is None or time.monotonic() >= deadline:
                raise FrameTimeout("deadline passed") from exc
            return  # the kernel timer woke us a little early: wait again for the rest
        except ConnectionResetError as exc:
            raise PeerClosed(str(exc)) from exc
        if not chunk:
            raise PeerClosed("connection closed" + (" mid-frame" if self._buffer else ""))
        self._buffer += chunk

    def _arm(self, option: int, deadline: float | None) -> None:
        """Set the kernel timeout of option to the time left until deadline (0 = none)."""
        if deadline is None:
            seconds = 0.0
        else:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise FrameTimeout("deadline passed")
            # Rounded up to a millisecond so that it rarely changes between steps.
            seconds = math.ceil(remaining * 1000) / 1000
        if seconds != self._timeouts[option]:
            whole = int(seconds)
            self._sock.setsockopt(socket.SOL_SOCKET, option, _TIMEVAL.pack(whole, round((seconds - whole) * 1_000_000)))
            self._timeouts[option] = seconds

    def close(self) -> None:
        self._sock.close()
