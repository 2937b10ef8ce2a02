"""Length-prefixed protobuf frames over a stream socket.

A frame is a 4-byte little-endian unsigned length, then that many bytes of one
serialized message. Reads go straight into one preallocated buffer (recv_into)
and are parsed from a memoryview of it, so that a small frame costs one recv()
and a large one no copy beyond the kernel's and the parser's. A large frame is
sent as header and body in one sendmsg() without joining them. A frame may
carry file descriptors (SCM_RIGHTS), taken only by receive_with_descriptors:
every other read passes no room for them, so the kernel closes any a peer sends.
"""

from __future__ import annotations

import array
import fcntl
import math
import mmap
import os
import socket
import stat
import struct
import time
from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np
from google.protobuf.message import DecodeError, Message

HEADER = struct.Struct("<I")
_TIMEVAL = struct.Struct("@ll")
_FD = array.array("i")
DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024
# Non-sleeping receive attempts before poll(): about 100 to 300 microseconds.
STEP_SPIN = 0
_READ_CHUNK = 1 << 16
# Below this many bytes a frame's header and body are joined before one send(): cheaper than a two-part sendmsg().
_JOIN_BELOW = 4096
MAX_DESCRIPTORS = 4  # the most descriptors receive_with_descriptors takes with one frame; more are closed

M = TypeVar("M", bound=Message)


class FramingError(Exception):
    """The peer broke the framing rules: oversized frame or undecodable message."""


class PeerClosed(Exception):
    """The peer closed the connection (possibly in the middle of a frame)."""


class DescriptorsRefused(Exception):
    """The kernel (or a sandbox's emulation of it) refused to pass descriptors; nothing of the frame was sent."""


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
        # Received bytes not yet returned are self._buffer[self._start:self._end].
        self._buffer = bytearray(_READ_CHUNK)
        self._start = 0
        self._end = 0
        self._descriptors: list[int] | None = None  # collecting SCM_RIGHTS while receive_with_descriptors runs
        self._timeouts = {socket.SO_RCVTIMEO: 0.0, socket.SO_SNDTIMEO: 0.0}

    @property
    def socket(self) -> socket.socket:
        return self._sock

    def send(self, message: Message, deadline: float | None = None, descriptors: Sequence[int] = ()) -> None:
        """Send one message, with descriptors (SCM_RIGHTS) attached to its first byte when given.

        Raises PeerClosed when the peer has gone, FrameTimeout when the peer
        does not take it before the deadline, DescriptorsRefused when the
        descriptors cannot be passed (the frame was not sent: send it without).
        """
        data = message.SerializeToString()
        self._arm(socket.SO_SNDTIMEO, deadline)
        try:
            if len(data) < _JOIN_BELOW and not descriptors:
                self._sock.sendall(HEADER.pack(len(data)) + data)
            else:
                self._send_parts(HEADER.pack(len(data)), data, descriptors)
        except (BlockingIOError, socket.timeout) as exc:
            raise FrameTimeout("the peer did not read before the deadline") from exc
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise PeerClosed(str(exc)) from exc

    def _send_parts(self, header: bytes, data: bytes, descriptors: Sequence[int]) -> None:
        ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", descriptors))] if descriptors else []
        try:
            sent = self._sock.sendmsg([header, data], ancillary)
        except (BlockingIOError, socket.timeout, BrokenPipeError, ConnectionResetError):
            raise
        except OSError as exc:
            if descriptors:
                raise DescriptorsRefused(str(exc)) from exc
            raise
        if sent < len(header):  # rare: the kernel took part of the header only
            self._sock.sendall(header[sent:])
            sent = len(header)
        if sent < len(header) + len(data):
            with memoryview(data) as view:
                self._sock.sendall(view[sent - len(header):])

    def receive(self, message: M, deadline: float | None = None) -> M:
        """Fill message with the next frame and return it.

        deadline is a time.monotonic() instant, or None to wait forever.
        Raises FrameTimeout, PeerClosed, or FramingError (oversized frame,
        undecodable bytes). Pass a fresh message for each large frame: the
        protobuf runtime keeps the memory of every frame parsed into one
        message until that message is freed.
        """
        start, end = self._next_frame(deadline)
        try:
            with memoryview(self._buffer) as view, view[start:end] as body:
                message.ParseFromString(body)  # type: ignore[arg-type]  # upb and the C++ runtime take any buffer
        except DecodeError as exc:
            raise FramingError(f"undecodable frame: {exc}") from exc
        finally:
            self._consume(end)
        return message

    def receive_with_descriptors(self, message: M, deadline: float | None = None) -> tuple[M, list[int]]:
        """Like receive(), and return the descriptors (SCM_RIGHTS) that came with the bytes read meanwhile.

        The caller owns the descriptors and must close them. At most
        MAX_DESCRIPTORS are kept; the kernel closes the rest.
        """
        self._descriptors = []
        try:
            received = self.receive(message, deadline)
        except BaseException:
            for descriptor in self._descriptors:
                os.close(descriptor)
            raise
        finally:
            descriptors, self._descriptors = self._descriptors, None
        return received, descriptors

    def receive_bytes(self, deadline: float | None = None) -> bytes:
        """Return the body of the next frame. Raises like receive()."""
        start, end = self._next_frame(deadline)
        body = bytes(self._buffer[start:end])
        self._consume(end)
        return body

    def _next_frame(self, deadline: float | None) -> tuple[int, int]:
        """Receive until a whole frame is buffered; return where its body starts and ends in the buffer."""
        while True:
            available = self._end - self._start
            if available >= HEADER.size:
                (length,) = HEADER.unpack_from(self._buffer, self._start)
                if length > self._max:
                    raise FramingError(f"frame of {length} bytes exceeds the limit of {self._max}")
                end = self._start + HEADER.size + length
                if end <= self._end:
                    return self._start + HEADER.size, end
                self._make_room(HEADER.size + length)
            else:
                self._make_room(HEADER.size)
            self._fill(deadline)

    def _consume(self, end: int) -> None:
        if end >= self._end:
            self._start = self._end = 0
        else:
            self._start = end

    def _make_room(self, needed: int) -> None:
        """Make the buffer hold needed bytes from self._start on, and room to read at least some of them."""
        capacity = len(self._buffer)
        if self._start + needed <= capacity and self._end < capacity:
            return
        pending = self._end - self._start
        if needed > capacity:
            grown = bytearray(max(needed, 2 * capacity))
            grown[:pending] = self._buffer[self._start:self._end]
            self._buffer = grown
        else:
            self._buffer[:pending] = self._buffer[self._start:self._end]
        self._start, self._end = 0, pending

    def _fill(self, deadline: float | None) -> None:
        count = None
        try:
            with memoryview(self._buffer) as view, view[self._end:] as free:
                read = self._read_descriptors if self._descriptors is not None else self._read
                for _ in range(self._spin):
                    try:
                        count = read(free, socket.MSG_DONTWAIT)
                        break
                    except BlockingIOError:
                        continue
                if count is None:
                    self._arm(socket.SO_RCVTIMEO, deadline)
                    count = read(free, 0)
        except (BlockingIOError, socket.timeout) as exc:
            if deadline is None or time.monotonic() >= deadline:
                raise FrameTimeout("deadline passed") from exc
            return  # the kernel timer woke us a little early: wait again for the rest
        except ConnectionResetError as exc:
            raise PeerClosed(str(exc)) from exc
        if not count:
            raise PeerClosed("connection closed" + (" mid-frame" if self._end > self._start else ""))
        self._end += count

    def _read(self, free: memoryview, flags: int) -> int:
        return self._sock.recv_into(free, 0, flags)

    def _read_descriptors(self, free: memoryview, flags: int) -> int:
        """recv_into that also keeps the SCM_RIGHTS descriptors that come with the bytes."""
        assert self._descriptors is not None
        count, ancillary, _, _ = self._sock.recvmsg_into([free], socket.CMSG_SPACE(MAX_DESCRIPTORS * _FD.itemsize), flags)
        for level, kind, data in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                usable = len(data) - len(data) % _FD.itemsize
                self._descriptors.extend(array.array("i", data[:usable]))
        return count

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


# Shared memory for large observations: the runner writes a step's tensor into a sealed memfd of its Episode and
# sends only where it lies; the policy runtime maps it read-only.
SHARED_MIN_BYTES = 4096  # smaller tensors stay on the socket: the region costs more than it saves below this
MAX_SHARED_BYTES = 256 * 1024 * 1024
_F_SEAL_FUTURE_WRITE = getattr(fcntl, "F_SEAL_FUTURE_WRITE", 0x0010)  # Linux 5.1; not named by Python 3.11's fcntl
_SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL


class SharedMemoryError(Exception):
    """A shared region cannot be made or mapped, or a reference into it is out of its bounds."""


class SharedWriter:
    """The runner's side: a memfd of size bytes, mapped writable here only.

    Sealed against shrinking and growing (so a mapping never faults), against
    further seals, and, where the kernel allows (Linux >= 5.1), against any
    write but through this process's mapping: a policy that receives the
    descriptor can only read it. `write_protected` says whether that last seal
    took. Raises SharedMemoryError when the kernel refuses a memfd.
    """

    def __init__(self, size: int) -> None:
        if not 0 < size <= MAX_SHARED_BYTES:
            raise SharedMemoryError(f"a shared region of {size} bytes is outside 1..{MAX_SHARED_BYTES}")
        try:
            descriptor = os.memfd_create("epg-observations", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        except (AttributeError, OSError) as exc:
            raise SharedMemoryError(f"no memfd: {exc}") from exc
        try:
            os.ftruncate(descriptor, size)
            self._map = mmap.mmap(descriptor, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            try:
                fcntl.fcntl(descriptor, fcntl.F_ADD_SEALS, _F_SEAL_FUTURE_WRITE)
                self.write_protected = True
            except OSError:
                self.write_protected = False
            fcntl.fcntl(descriptor, fcntl.F_ADD_SEALS, _SEALS)
        except OSError as exc:
            os.close(descriptor)
            raise SharedMemoryError(f"cannot prepare the shared region: {exc}") from exc
        self._descriptor = descriptor
        self.size = size

    def fileno(self) -> int:
        return self._descriptor

    def write(self, array: Any) -> int:
        """Copy a NumPy array into the region from offset 0, little-endian in C order; return its length in bytes.

        The caller checks that array.nbytes <= size.
        """
        length = int(array.nbytes)
        if array.flags.c_contiguous and array.dtype.byteorder != ">":
            self._map[:length] = memoryview(array).cast("B")  # one memcpy, no NumPy call
        else:
            target = np.ndarray(array.shape, dtype=array.dtype.newbyteorder("<"), buffer=self._map)
            np.copyto(target, array, casting="equiv")
        return length

    def close(self) -> None:
        self._map.close()
        os.close(self._descriptor)


class SharedReader:
    """The policy runtime's side: the runner's region mapped read-only, its descriptor closed."""

    def __init__(self, descriptor: int, size: int) -> None:
        """Map size bytes of descriptor read-only and close it (always, even on failure).

        Raises SharedMemoryError when the descriptor is not a regular file
        (a memfd) of exactly size bytes, or size is outside 1..MAX_SHARED_BYTES.
        """
        try:
            if not 0 < size <= MAX_SHARED_BYTES:
                raise SharedMemoryError(f"a shared region of {size} bytes is outside 1..{MAX_SHARED_BYTES}")
            status = os.fstat(descriptor)
            if not stat.S_ISREG(status.st_mode) or status.st_size != size:
                raise SharedMemoryError(f"the shared descriptor is not a region of {size} bytes")
            self._map = mmap.mmap(descriptor, size, mmap.MAP_SHARED, mmap.PROT_READ)
        except OSError as exc:
            raise SharedMemoryError(f"cannot map the shared region: {exc}") from exc
        finally:
            os.close(descriptor)
        self.size = size

    def view(self, offset: int, length: int) -> memoryview:
        """The bytes [offset, offset + length) of the region. Raises SharedMemoryError when they lie outside it."""
        if offset < 0 or length < 0 or offset + length > self.size:
            raise SharedMemoryError(f"bytes {offset}..{offset + length} lie outside the shared region of {self.size}")
        return memoryview(self._map)[offset:offset + length]

    def close(self) -> None:
        self._map.close()
