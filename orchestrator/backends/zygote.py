"""The Host's side of forked Episode isolation: a lane container running the zygote, and the one connection to it.

The lane container is hardened like a policy container (ContainerSpec's defaults) but for its seccomp profile,
Docker's default plus namespace creation (seccomp/lane.json); its zygote (`epg_sdk.runtime.zygote`) forks one
Episode sandbox per slot. ARCHITECTURE.md, "Forked Episode sandboxes", says why each part is there.
"""

from __future__ import annotations

import base64
import importlib.resources
import json
import logging
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from epg_sdk.outcomes import ContainerExit
from orchestrator.backends.container_spec import BindMount, ContainerSpec
from orchestrator.backends.engine import DockerEngine
from orchestrator.backends.settings import SandboxLimits
from orchestrator.kernel.infrastructure import InfraErrorCode, InfrastructureError

log = logging.getLogger(__name__)

LANE_EXCHANGE = "/exchange"
LANE_PROGRAMS = "/programs"
LANE_CONTROL = "/control"
CONTROL_SOCKET = "zygote.sock"
# The zygote's own memory beside the Episode's limit: its resident set (NumPy, protobuf and the runtime imported:
# 36 MiB measured), the pages pre-forked sandboxes have made their own (about 3 MiB each: 1 of the init, 2 of the
# runtime; a pool of 16 on one lane 48 MiB), and headroom. The OOM killer takes a sandbox first (oom_score_adj 1000;
# the zygote keeps 0), the largest, the running Episode's.
ZYGOTE_MEMORY_BYTES = 160 * 1024 * 1024
# Processes of the lane beyond the running Episode's own (limits.pids, counted per sandbox): the zygote, and two
# per pre-forked sandbox.
LANE_SPARE_PIDS = 96
ZYGOTE_READY_S = 120.0
ALIVE_CHECK_S = 0.25
REPLY_S = 30.0
NO_USER_NAMESPACES_FIX = (
    "forked isolation needs unprivileged user namespaces and a kernel that lets a container create them "
    "(sysctl user.max_user_namespaces > 0; kernel.unprivileged_userns_clone = 1 where it exists; no AppArmor "
    "restriction such as kernel.apparmor_restrict_unprivileged_userns = 1 on the Docker host), or choose "
    "sandbox isolation \"container\""
)


def lane_profile() -> str:
    """The outer seccomp profile of a lane container (JSON text), from the installed package."""
    return (importlib.resources.files("orchestrator.backends") / "seccomp" / "lane.json").read_text()


def lane_spec(*, image: str, labels: dict[str, str], name: str, exchange: Path, programs: Path, control: Path,
              limits: SandboxLimits, cpu: str, tail_bytes: int) -> ContainerSpec:
    """The ContainerSpec of a lane container running the zygote: the policy-runtime image, hardened as a policy
    container, with the lane's exchange and the sandbox's Program directories read-only and its control directory
    writable."""
    return ContainerSpec(
        image=image,
        command=("python3", "-m", "epg_sdk.runtime.zygote", "--control", f"{LANE_CONTROL}/{CONTROL_SOCKET}",
                 "--exchange", LANE_EXCHANGE, "--programs", LANE_PROGRAMS, "--tmpfs-bytes", str(limits.tmpfs_bytes),
                 "--shm-bytes", str(limits.shm_bytes), "--processes", str(limits.pids), "--tail-bytes", str(tail_bytes)),
        labels=labels,
        mounts=(
            BindMount(source=str(exchange), target=LANE_EXCHANGE, read_only=True),
            BindMount(source=str(programs), target=LANE_PROGRAMS, read_only=True),
            BindMount(source=str(control), target=LANE_CONTROL, read_only=False),
        ),
        tmpfs={"/tmp": "rw,nosuid,nodev,size=1m"},  # the staging point of each sandbox's root; nothing is written
        memory_bytes=limits.memory_bytes + ZYGOTE_MEMORY_BYTES,
        nano_cpus=0 if cpu and limits.cpus >= 1 else int(limits.cpus * 1e9),
        cpuset_cpus=cpu,
        pids_limit=limits.pids + LANE_SPARE_PIDS,
        environment={"HOME": "/tmp", "PYTHONDONTWRITEBYTECODE": "1", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"},
        hostname="lane",
        name=name,
        seccomp_profile=lane_profile(),
    )


@dataclass(slots=True)
class ForkedSlot:
    """The handle a pool Slot holds for its forked sandbox (in place of a container)."""

    name: str
    exit: ContainerExit | None = None
    tail: bytes = b""
    cpu_seconds: float = 0.0  # of the sandbox's processes from the fork to their end, once it has ended
    ended: threading.Event = field(default_factory=threading.Event)
    forgotten: bool = False


class LaneZygote:
    """One lane container and the Host's one connection to its zygote.

    Thread-safe: the lock guards the socket's writes and the slot table; a reader thread records the zygote's
    replies and the sandboxes' exits. Every method raises InfrastructureError(CONTAINER_FAILED) once the zygote is
    gone.
    """

    def __init__(self, engine: DockerEngine, container: Any, sock: socket.socket, pid: int, rss_bytes: int) -> None:
        self._engine = engine
        self.container = container
        self._socket = sock
        self.zygote_pid = pid
        self.rss_bytes = rss_bytes
        self._lock = threading.Lock()
        self._slots: dict[str, ForkedSlot] = {}
        self._replies: dict[str, tuple[threading.Event, list[dict[str, Any]]]] = {}
        self._gone = ""
        self._reader = threading.Thread(target=self._read, name="epg-zygote-reader", daemon=True)
        self._reader.start()

    @classmethod
    def start(cls, engine: DockerEngine, spec: ContainerSpec, control: Path) -> LaneZygote:
        """Start the lane container of spec and connect to its zygote (its socket in control, a directory of the
        Host's). Raises InfrastructureError: CONTAINER_FAILED when the engine refuses the container (its seccomp
        profile), when the kernel refuses a sandbox (the zygote's self-check names the fix) or the zygote does not
        come up."""
        try:
            container = engine.start(spec)
        except InfrastructureError as exc:
            raise InfrastructureError(InfraErrorCode.CONTAINER_FAILED,
                                      f"the engine refused the lane container of forked isolation ({exc.message}); it "
                                      "needs a Docker engine that accepts a custom seccomp profile (security_opt "
                                      "seccomp=<JSON>), or choose sandbox isolation \"container\"", exc.evidence) from exc
        path = control / CONTROL_SOCKET
        deadline = time.monotonic() + ZYGOTE_READY_S
        next_check = 0.0
        while not path.exists():
            now = time.monotonic()
            if now >= next_check:  # each check is an engine call, whose CPU the zygote's own start needs
                running, code = engine.state(container)
                if not running or now > deadline:
                    logs = engine.logs_tail(container, 16 * 1024).decode("utf-8", "replace")
                    raise InfrastructureError(InfraErrorCode.CONTAINER_FAILED,
                                              "the zygote of a lane container did not come up", f"exit {code}\n{logs}")
                next_check = now + ALIVE_CHECK_S
            time.sleep(0.02)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(max(1.0, deadline - time.monotonic()))
        sock.connect(str(path))
        hello = json.loads(_read_line(sock) or b'{"op": "refused", "reason": "the zygote closed its socket"}')
        sock.settimeout(None)
        if hello.get("op") != "ready":
            sock.close()
            raise InfrastructureError(InfraErrorCode.CONTAINER_FAILED,
                                      f"the kernel refused a forked Episode sandbox: {NO_USER_NAMESPACES_FIX}",
                                      str(hello.get("reason", "")))
        return cls(engine, container, sock, int(hello["pid"]), int(hello["rss_bytes"]))

    # requests ----------------------------------------------------------------------------------------------------------

    def spawn(self, slot: str, cpu_seconds: int) -> ForkedSlot:
        """Fork the sandbox of slot (its socket and Program directory exist); return its handle."""
        handle = ForkedSlot(slot)
        with self._lock:
            self._slots[slot] = handle
        answer = self._request(slot, {"op": "spawn", "slot": slot, "cpu_seconds": cpu_seconds})
        if answer.get("op") != "spawned":
            raise InfrastructureError(InfraErrorCode.CONTAINER_FAILED, f"the zygote could not fork a sandbox for {slot}",
                                      str(answer.get("reason", "")))
        return handle

    def status(self) -> dict[str, Any]:
        """What the zygote says of itself: threads, rss_bytes, frozen_objects, sandboxes, program_imported."""
        return self._request("", {"op": "status", "slot": ""})

    def _request(self, slot: str, message: dict[str, Any]) -> dict[str, Any]:
        event = threading.Event()
        reply: list[dict[str, Any]] = []
        with self._lock:
            if slot in self._replies:
                raise RuntimeError(f"a request about {slot!r} is already waiting")
            self._replies[slot] = (event, reply)
            self._send(message)
        if not event.wait(REPLY_S) or not reply:
            raise self._failure(f"the zygote did not answer {message['op']} {slot}")
        return reply[0]

    def kill(self, handle: ForkedSlot) -> None:
        """Kill the slot's sandbox (its PID 1, and with it every process in it); a sandbox that has ended is left."""
        with self._lock:
            if not handle.ended.is_set() and not self._gone:
                self._send({"op": "kill", "slot": handle.name})

    def exit_of(self, handle: ForkedSlot, wait_s: float) -> ContainerExit:
        """Wait up to wait_s for the sandbox to end; return its exit status and OOM flag (exit_code None: running)."""
        if not handle.ended.wait(wait_s) or handle.exit is None:
            return ContainerExit(exit_code=None)
        return handle.exit

    def forget(self, handle: ForkedSlot) -> None:
        """Kill the sandbox if it still runs and drop its record."""
        self.kill(handle)
        with self._lock:
            handle.forgotten = True
            if handle.ended.is_set():
                self._slots.pop(handle.name, None)

    def close(self) -> None:
        """Close the connection: the zygote kills every sandbox and exits (the container is reaped by label)."""
        try:
            self._socket.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._socket.close()
        self._reader.join(timeout=5)

    # the reader --------------------------------------------------------------------------------------------------------

    def _send(self, message: dict[str, Any]) -> None:
        if self._gone:
            raise self._failure("the zygote is gone")
        try:
            self._socket.sendall(json.dumps(message).encode() + b"\n")
        except OSError as exc:
            raise self._failure(f"the zygote's connection failed: {exc}") from exc

    def _read(self) -> None:
        buffer = b""
        reason = "the zygote closed its connection"
        try:
            while True:
                data = self._socket.recv(65536)
                if not data:
                    break
                buffer += data
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    self._record(json.loads(line))
        except (OSError, ValueError) as exc:
            reason = f"the zygote's connection failed: {exc}"
        with self._lock:
            self._gone = reason
            for event, _ in self._replies.values():
                event.set()
            for handle in self._slots.values():
                handle.ended.set()

    def _record(self, message: dict[str, Any]) -> None:
        slot = str(message.get("slot", ""))
        with self._lock:
            if message.get("op") == "exit":
                handle = self._slots.get(slot)
                if handle is None:
                    return
                handle.exit = ContainerExit(exit_code=int(message["exit_code"]), oom_killed=bool(message.get("oom_killed")))
                handle.tail = base64.b64decode(message.get("tail", ""))
                handle.cpu_seconds = float(message.get("cpu_seconds", 0.0))
                handle.ended.set()
                if handle.forgotten:
                    del self._slots[slot]
                return
            waiting = self._replies.pop(slot, None)
        if waiting is not None:
            waiting[1].append(message)
            waiting[0].set()

    def _failure(self, message: str) -> InfrastructureError:
        logs = self._engine.logs_tail(self.container, 16 * 1024).decode("utf-8", "replace")
        return InfrastructureError(InfraErrorCode.CONTAINER_FAILED, message, f"{self._gone}\n--- lane log tail ---\n{logs}")


def _read_line(sock: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return data.strip()
