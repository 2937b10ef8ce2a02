"""The Host's door to a runner in a Pod: a local Unix socket whose every connection is piped through an exec stream.

Inside the runner container a small pipe (BRIDGE, run with the environment
image's python3) joins the exec stream's stdin and stdout to the runner's
Unix socket; the API server authenticates the stream, and nothing in the Pod
listens on TCP. The Program reaches the Pod's program emptyDir the same way
(UNPACK, the files on stdin).
"""

from __future__ import annotations

import base64
import json
import logging
import socket
import struct
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from websocket import WebSocketException

from orchestrator.backends.kubernetes.cluster import Cluster
from orchestrator.kernel.infrastructure import InfraErrorCode, InfrastructureError
from orchestrator.kernel.program import Program

if TYPE_CHECKING:
    from kubernetes.stream.ws_client import WSClient

log = logging.getLogger(__name__)

BRIDGE = """\
import os, socket, sys, threading, time
deadline = time.monotonic() + float(sys.argv[2])
while True:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(sys.argv[1])
        break
    except OSError:
        s.close()
        if time.monotonic() > deadline:
            sys.exit(3)
        time.sleep(0.05)
def up():
    while True:
        data = os.read(0, 65536)
        if not data:
            break
        s.sendall(data)
    s.shutdown(socket.SHUT_WR)
threading.Thread(target=up, daemon=True).start()
while True:
    data = s.recv(65536)
    if not data:
        break
    os.write(1, data)
"""

# Reads an 8-byte length and that many bytes of JSON {relative path: base64} from stdin; writes the files below argv[1].
UNPACK = """\
import base64, json, os, struct, sys
def read(n):
    chunks = []
    while n:
        chunk = os.read(0, n)
        if not chunk:
            sys.exit(4)
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)
(size,) = struct.unpack(">Q", read(8))
root = sys.argv[1]
for path, data in json.loads(read(size)).items():
    target = os.path.join(root, path)
    if os.path.isabs(path) or ".." in path.split("/"):
        sys.exit(5)
    os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
    with open(target, "wb") as f:
        f.write(base64.b64decode(data))
    os.chmod(target, 0o644)
print("ok", flush=True)
"""

# Writes the last argv[2] bytes of the regular file argv[1] to stdout; a link, a FIFO or anything else is not read (the
# policy writes that directory, the runner reads it: nothing may lead the runner to read one of its own files).
TAIL = """\
import os, stat, sys
try:
    fd = os.open(sys.argv[1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
except OSError:
    sys.exit(0)
info = os.fstat(fd)
if not stat.S_ISREG(info.st_mode):
    sys.exit(0)
limit = int(sys.argv[2])
os.lseek(fd, max(0, info.st_size - limit), os.SEEK_SET)
left, chunks = limit, []
while left > 0:
    chunk = os.read(fd, left)
    if not chunk:
        break
    chunks.append(chunk)
    left -= len(chunk)
sys.stdout.buffer.write(b"".join(chunks))
"""

CONNECT_WAIT_S = 60.0
# How a pipe ends when either side hangs up (a closed socket polled raises TypeError or ValueError).
_STREAM_ENDED = (OSError, ValueError, TypeError, WebSocketException)


class ExecRelay:
    """Listens on path; pipes each accepted connection to target (a Unix socket inside container of Pod pod)."""

    def __init__(self, cluster: Cluster, pod: str, container: str, target: str, path: Path) -> None:
        self._cluster, self._pod, self._container, self._target = cluster, pod, container, target
        self.path = path
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(path))
        self._listener.listen(4)
        self._closed = False
        self._streams: list[WSClient] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept_loop, name=f"epg-relay-{pod}", daemon=True).start()

    def _accept_loop(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    def _serve(self, connection: socket.socket) -> None:
        try:
            ws = self._cluster.exec_stream(self._pod, self._container, ["python3", "-c", BRIDGE, self._target, str(CONNECT_WAIT_S)])
        except InfrastructureError as exc:
            log.warning("relay to %s: %s (%s)", self._pod, exc, exc.evidence)
            connection.close()
            return
        with self._lock:
            if self._closed:
                ws.close()
                connection.close()
                return
            self._streams.append(ws)
        threading.Thread(target=self._upstream, args=(connection, ws), daemon=True).start()
        try:
            while ws.is_open():
                data = ws.read_stdout(timeout=1.0)
                if data:
                    connection.sendall(data)
            rest = ws.read_stdout(timeout=0)  # what arrived with the close
            if rest:
                connection.sendall(rest)
        except _STREAM_ENDED:
            pass  # one side hung up: the other is closed below
        finally:
            connection.close()
            ws.close()

    @staticmethod
    def _upstream(connection: socket.socket, ws: WSClient) -> None:
        try:
            while True:
                data = connection.recv(65536)
                if not data:
                    break
                ws.write_stdin(data)
        except _STREAM_ENDED:
            pass
        finally:
            ws.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            streams, self._streams = self._streams, []
        try:
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()
        for ws in streams:
            ws.close()
        self.path.unlink(missing_ok=True)


def upload_program(cluster: Cluster, pod: str, container: str, target: str, program: Program, timeout_s: float = 60.0) -> None:
    """Write program below target inside container of pod. Raises InfrastructureError(RUNNER_FAILED)."""
    document = json.dumps({f.path: base64.b64encode(f.data).decode() for f in program.files}).encode()
    ws = cluster.exec_stream(pod, container, ["python3", "-c", UNPACK, target])
    try:
        ws.write_stdin(struct.pack(">Q", len(document)) + document)
        deadline = time.monotonic() + timeout_s
        while ws.is_open() and time.monotonic() < deadline:
            ws.update(timeout=1.0)
        if ws.is_open():
            raise InfrastructureError(InfraErrorCode.RUNNER_FAILED, f"writing the Program into Pod {pod} did not finish in time")
        stderr = ws.read_stderr(timeout=0) or b""
        try:
            succeeded = ws.returncode == 0
        except (TypeError, KeyError, ValueError, IndexError):  # no status on the error channel
            succeeded = False
        if not succeeded:
            raise InfrastructureError(InfraErrorCode.RUNNER_FAILED, f"writing the Program into Pod {pod} failed",
                                      evidence=stderr.decode("utf-8", "replace"))
    finally:
        ws.close()


def read_tail(cluster: Cluster, pod: str, container: str, path: str, max_bytes: int, timeout_s: float = 20.0) -> bytes:
    """The last max_bytes of the regular file path inside container of pod (b"" when it is missing, not a regular
    file, or the exec fails: this is diagnostics, never a reason to fail an Episode)."""
    try:
        ws = cluster.exec_stream(pod, container, ["python3", "-c", TAIL, path, str(max_bytes)])
    except InfrastructureError:
        return b""
    chunks: list[bytes] = []
    try:
        deadline = time.monotonic() + timeout_s
        while ws.is_open() and time.monotonic() < deadline:
            ws.update(timeout=1.0)
            chunks.append(ws.read_stdout(timeout=0) or b"")
        chunks.append(ws.read_stdout(timeout=0) or b"")
    except _STREAM_ENDED:
        pass
    finally:
        ws.close()
    return b"".join(chunks)[-max_bytes:]
