"""The zygote: the lane container's one long-lived process, which forks a fresh Episode sandbox per slot.

It imports the policy runtime (and with it NumPy and protobuf) once, warms it, builds the inner seccomp filter and
freezes its heap; then it serves the Host over one unix socket connection and clones, per slot, a child into fresh
namespaces (`epg_sdk.runtime.namespaces`), the sandbox's init, which sets the sandbox up and forks the runtime that
serves the slot's Episode in-process with `policy_runtime.serve_connected`: no exec, nothing imported again. The
zygote holds no secret and no Episode's data, never runs a line of a Program, and is single-threaded (checked
before every fork).

Control protocol: newline-delimited JSON objects, one connection (the Host's).
  Host -> zygote  {"op": "spawn", "slot": NAME, "cpu_seconds": N}   fork a sandbox for the slot
                  {"op": "kill", "slot": NAME}                      kill the slot's sandbox (its PID 1, and so all)
                  {"op": "status", "slot": ""}                      the zygote's threads, RSS, frozen objects
  zygote -> Host  {"op": "ready", "pid": P, "rss_bytes": N}         once, after the start-up self-check
                  {"op": "refused", "reason": TEXT}                 once, instead of ready, then the zygote exits
                  {"op": "spawned", "slot": NAME} / {"op": "error", "slot": NAME, "reason": TEXT}
                  {"op": "status", "slot": "", "threads": N, "rss_bytes": N, "frozen_objects": N, ...}
                  {"op": "exit", "slot": NAME, "exit_code": C, "oom_killed": B, "cpu_seconds": S, "tail": BASE64}
exit_code is the sandbox's PID 1's exit status, or 128 + the signal that killed it (as the engine reports a
container's); cpu_seconds the CPU time of its processes from the fork on (those it waited for). The tail is the
last bytes the sandbox wrote to its descriptors 1 and 2 (the Program's print()s go to the runtime's own tail,
reported to the runner).

Run as `python3 -m epg_sdk.runtime.zygote --control SOCKET --exchange DIR --programs DIR [limits]`.
"""

from __future__ import annotations

import gc

if __name__ == "__main__":
    gc.disable()  # no collections while the runtime's modules load; the heap is frozen after

import argparse
import base64
import json
import os
import selectors
import signal
import socket
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import epg_sdk.runtime.inner_filter as inner_filter
import epg_sdk.runtime.namespaces as namespaces
import epg_sdk.runtime.policy_runtime as policy_runtime

CGROUP_V1_OOM = "/sys/fs/cgroup/memory/memory.oom_control"
CGROUP_V2_EVENTS = "/sys/fs/cgroup/memory.events"
SOCKET_NAME = "policy.sock"
# The exit statuses of a sandbox that failed before the Program could run (its reason is in its output tail).
EXIT_SETUP_FAILED = 125
SANDBOX_ENVIRONMENT = {
    "HOME": "/tmp",
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "PYTHONDONTWRITEBYTECODE": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
}


class ZygoteRefused(RuntimeError):
    """The zygote cannot fork a sandbox safely: it has more than one thread."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Config:
    control: str
    exchange: str
    programs: str
    tmpfs_bytes: int
    shm_bytes: int
    processes: int
    files: int
    tail_bytes: int


@dataclass(slots=True, kw_only=True)
class _Child:
    slot: str
    pid: int
    pidfd: int
    output: int  # read end of the sandbox's descriptors 1 and 2
    spawn_seconds: float = 0.0  # the zygote's CPU time in the clone
    tail: bytearray = field(default_factory=bytearray)


def thread_count() -> int:
    """The threads of this process, as the kernel lists them."""
    return len(os.listdir("/proc/self/task"))


def oom_kills() -> int:
    """The lane cgroup's OOM kill counter (cgroup v1 memory.oom_control or v2 memory.events), -1 when neither is
    readable."""
    for path in (CGROUP_V1_OOM, CGROUP_V2_EVENTS):
        try:
            with open(path) as file:
                for line in file:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except OSError:
            continue
    return -1


def exit_code_of(status: int) -> int:
    """A wait status as the engine reports a container's: the exit code, or 128 + the killing signal."""
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.waitstatus_to_exitcode(status)


class Zygote:
    """The prepared runtime and its children. Call only from its one thread."""

    def __init__(self, config: Config) -> None:
        self._config = config
        self._filter = inner_filter.build()
        binds, links = namespaces.root_layout([p for p in sys.path if p] + [sys.prefix, sys.exec_prefix])
        self._binds = binds
        self._links = links
        with open("/proc/sys/kernel/cap_last_cap") as file:
            self._last_capability = int(file.read())
        self._children: dict[str, _Child] = {}
        self._selector = selectors.DefaultSelector()
        self._connection: socket.socket | None = None
        self._buffer = b""
        self._oom_seen = oom_kills()
        self._uid, self._gid = os.getuid(), os.getgid()

    # forking -------------------------------------------------------------------------------------------------------

    def spawn(self, slot: str, cpu_seconds: int) -> _Child:
        """Fork the sandbox of slot; return its record. Raises ZygoteRefused when this process has more than one
        thread, ValueError for a slot name that is not a plain name, SetupError when the kernel refuses the clone."""
        if not slot or "/" in slot or slot in (".", "..") or slot in self._children:
            raise ValueError(f"bad or reused slot name {slot!r}")
        threads = thread_count()
        if threads != 1:
            raise ZygoteRefused(f"the zygote has {threads} threads; a fork would copy a lock another one holds")
        read_end, write_end = os.pipe()
        began = time.process_time()
        pid = namespaces.clone_into_namespaces()
        if pid == 0:  # the sandbox's init, PID 1 of its new PID namespace
            code = EXIT_SETUP_FAILED
            try:
                os.dup2(write_end, 1)
                os.dup2(write_end, 2)
                code = self._init(slot, cpu_seconds, serve=True)
            except BaseException as exc:  # nothing of the zygote's may run on in the child: report and leave
                _say(f"sandbox set-up failed: {type(exc).__name__}: {exc}")
            finally:
                os._exit(code)
        spawn_seconds = time.process_time() - began  # the kernel's work of the clone (namespaces, page tables)
        os.close(write_end)
        os.set_blocking(read_end, False)
        child = _Child(slot=slot, pid=pid, pidfd=os.pidfd_open(pid), output=read_end, spawn_seconds=spawn_seconds)
        self._children[slot] = child
        self._selector.register(child.pidfd, selectors.EVENT_READ, ("exit", child))
        self._selector.register(child.output, selectors.EVENT_READ, ("output", child))
        return child

    def _init(self, slot: str, cpu_seconds: int, *, serve: bool) -> int:
        """In the sandbox's init: set the sandbox up, then fork the runtime that serves slot's Episode and reap until
        it ends (serve False: return 0 once set up). Returns an exit status: the runtime's, or 128 + the signal
        that ended it, as docker-init reports a container's.

        The Program never runs as PID 1, whose signals its own namespace cannot deliver unless it handles them (a
        Program's kill of itself would do nothing)."""
        namespaces.keep_only([1, 2])  # none of the zygote's descriptors (the Host's connection, other sandboxes')
        namespaces.die_with_parent()
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Program's SIGINT must not make its init raise
        with open("/proc/self/oom_score_adj", "w") as file:
            file.write("1000")  # the OOM killer takes a sandbox first, and never the zygote (0)
        namespaces.map_own_ids(self._uid, self._gid)
        namespaces.no_core_dumps()  # after the writes to /proc/self: a process that is not dumpable no longer owns them
        config = self._config
        namespaces.build_root(namespaces.Layout(
            binds=self._binds, links=self._links,
            io_source=os.path.join(config.exchange, slot) if serve else config.exchange,
            program_source=os.path.join(config.programs, slot) if serve else config.programs,
            tmpfs_bytes=config.tmpfs_bytes, shm_bytes=config.shm_bytes,
        ))
        namespaces.set_limits(namespaces.Limits(processes=config.processes, files=config.files,
                                                file_bytes=config.tmpfs_bytes, cpu_seconds=cpu_seconds))
        namespaces.drop_privileges(self._last_capability)
        self._filter.load()
        if not serve:
            return 0
        pid = os.fork()
        if pid == 0:  # the runtime
            code = EXIT_SETUP_FAILED
            try:
                code = self._runtime()
            except BaseException as exc:
                _say(f"sandbox set-up failed: {type(exc).__name__}: {exc}")
            finally:
                os._exit(code)
        namespaces.keep_only([])
        while True:  # reap every orphan of the sandbox until the runtime itself has ended
            try:
                ended, status = os.waitpid(-1, 0)
            except InterruptedError:
                continue
            if ended == pid:
                return exit_code_of(status)

    def _runtime(self) -> int:
        """In the sandbox's runtime process: connect, keep nothing else, then serve the Episode. Returns an exit
        status."""
        signal.signal(signal.SIGINT, signal.default_int_handler)
        null = os.open("/dev/null", os.O_RDONLY)  # first: descriptor 0 is free here, the socket must not take it
        if null != 0:
            os.dup2(null, 0)
        sock = policy_runtime.connect(f"/epg/io/{SOCKET_NAME}")
        namespaces.keep_only([0, 1, 2, sock.fileno()])
        os.environ.clear()
        os.environ.update(SANDBOX_ENVIRONMENT)
        _reseed()
        return policy_runtime.serve_connected(sock)

    # serving ---------------------------------------------------------------------------------------------------------

    def serve(self, listener: socket.socket) -> None:
        """Accept the Host's one connection and serve it until it closes; then kill every sandbox."""
        connection, _ = listener.accept()
        listener.close()
        self._connection = connection
        self._selector.register(connection, selectors.EVENT_READ, ("control", None))
        self._send({"op": "ready", "pid": os.getpid(), "rss_bytes": rss_bytes()})
        serving = True
        while serving:
            for key, _ in self._selector.select():
                kind, child = key.data
                if kind == "control":
                    serving = self._read_control()
                elif not self._is_current(child):
                    continue  # reaped earlier in this round: its descriptors are closed (and may be reused)
                elif kind == "output":
                    if child.output >= 0:
                        self._read_output(child)
                else:
                    self._reap(child)
        for child in list(self._children.values()):
            os.kill(child.pid, signal.SIGKILL)

    def _is_current(self, child: _Child) -> bool:
        return self._children.get(child.slot) is child

    def _read_control(self) -> bool:
        """Handle the Host's complete requests; return False once it has closed the connection."""
        assert self._connection is not None
        data = self._connection.recv(65536)
        if not data:
            self._selector.unregister(self._connection)
            self._connection.close()
            self._connection = None
            return False
        self._buffer += data
        while b"\n" in self._buffer:
            line, self._buffer = self._buffer.split(b"\n", 1)
            self._handle(json.loads(line))
        return True

    def _handle(self, request: dict[str, Any]) -> None:
        op, slot = request.get("op"), str(request.get("slot", ""))
        if op == "spawn":
            try:
                self.spawn(slot, int(request.get("cpu_seconds", 3600)))
            except (ValueError, OSError, ZygoteRefused) as exc:
                self._send({"op": "error", "slot": slot, "reason": f"{type(exc).__name__}: {exc}"})
            else:
                self._send({"op": "spawned", "slot": slot})
        elif op == "status":  # for tests and figures: what the zygote is, as it says itself
            self._send({"op": "status", "slot": slot, "threads": thread_count(), "rss_bytes": rss_bytes(),
                        "frozen_objects": gc.get_freeze_count(), "sandboxes": len(self._children),
                        "program_imported": "policy" in sys.modules})
        elif op == "kill":
            child = self._children.get(slot)
            if child is not None:
                os.kill(child.pid, signal.SIGKILL)  # the sandbox's init, PID 1: its namespace's processes die with it
        else:
            self._send({"op": "error", "slot": slot, "reason": f"unknown op {op!r}"})

    def _read_output(self, child: _Child, rounds: int = 1) -> bool:
        """Read what the sandbox wrote, at most rounds reads of 64 KiB (a sandbox that writes without end must not
        keep the zygote from its other work), keeping the last tail_bytes; return False at end-of-file."""
        for _ in range(rounds):
            try:
                data = os.read(child.output, 65536)
            except BlockingIOError:
                return True
            if not data:
                self._selector.unregister(child.output)
                os.close(child.output)
                child.output = -1
                return False
            child.tail += data
            if len(child.tail) > 2 * self._config.tail_bytes:
                del child.tail[:-self._config.tail_bytes]
        return True

    def _reap(self, child: _Child) -> None:
        _, status, usage = os.wait4(child.pid, 0)
        self._selector.unregister(child.pidfd)
        os.close(child.pidfd)
        if child.output >= 0:
            self._read_output(child, rounds=4)  # what the pipe still holds: its writers are dead or dying
            if child.output >= 0:  # a process of the sandbox may still hold it for an instant: what came is enough
                self._selector.unregister(child.output)
                os.close(child.output)
                child.output = -1
        del self._children[child.slot]
        code = exit_code_of(status)
        oom = False
        if code == 128 + signal.SIGKILL:
            kills = oom_kills()
            # Killed while the lane's OOM kill counter rose: the OOM killer's victim (a sandbox always goes first). A
            # kill the Host asked for may have come after the fact, so it does not count against this.
            oom = kills > self._oom_seen
            self._oom_seen = kills
        tail = bytes(child.tail[-self._config.tail_bytes:])
        self._send({"op": "exit", "slot": child.slot, "exit_code": code, "oom_killed": oom,
                    "cpu_seconds": child.spawn_seconds + usage.ru_utime + usage.ru_stime, "tail": base64.b64encode(tail).decode()})

    def _send(self, message: dict[str, Any]) -> None:
        if self._connection is not None:
            self._connection.sendall(json.dumps(message).encode() + b"\n")

    # start-up --------------------------------------------------------------------------------------------------------

    def self_check(self) -> str:
        """Clone one sandbox that sets itself up completely and exits before serving anything; return "" when it
        could, else what it said. The kernel or the engine refusing shows here, before any Episode."""
        read_end, write_end = os.pipe()
        try:
            pid = namespaces.clone_into_namespaces()
        except namespaces.SetupError as exc:
            return str(exc)
        if pid == 0:
            code = EXIT_SETUP_FAILED
            try:
                os.dup2(write_end, 2)
                code = self._init("", 1, serve=False)
            except BaseException as exc:
                _say(f"{type(exc).__name__}: {exc}")
            finally:
                os._exit(code)
        os.close(write_end)
        _, status = os.waitpid(pid, 0)
        with os.fdopen(read_end, "rb") as said:
            text = said.read().decode("utf-8", "replace").strip()
        return "" if os.waitstatus_to_exitcode(status) == 0 else text or f"exit status {status}"


def _say(text: str) -> None:
    """Write text to descriptor 2 if it is open (a child's last words, read by the zygote into its tail)."""
    try:
        os.write(2, text.encode("utf-8", "replace") + b"\n")
    except OSError:
        pass


def _reseed() -> None:
    """Fresh random state for the sandbox: the zygote's would be the same in every sandbox of the lane."""
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is not None:
        numpy_random.seed()
    random = sys.modules.get("random")
    if random is not None:
        random.seed()


def rss_bytes() -> int:
    """This process's resident set size (VmRSS)."""
    with open("/proc/self/status") as file:
        for line in file:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def _parse(argv: list[str]) -> Config:
    parser = argparse.ArgumentParser(prog="python3 -m epg_sdk.runtime.zygote")
    parser.add_argument("--control", required=True, help="the unix socket to listen on for the Host")
    parser.add_argument("--exchange", required=True, help="the lane's exchange directory (slot sockets)")
    parser.add_argument("--programs", required=True, help="the sandbox's Program directories")
    parser.add_argument("--tmpfs-bytes", type=int, default=64 << 20)
    parser.add_argument("--shm-bytes", type=int, default=16 << 20)
    parser.add_argument("--processes", type=int, default=64)
    parser.add_argument("--files", type=int, default=1024)
    parser.add_argument("--tail-bytes", type=int, default=16384)
    args = parser.parse_args(argv)
    return Config(control=args.control, exchange=args.exchange, programs=args.programs, tmpfs_bytes=args.tmpfs_bytes,
                  shm_bytes=args.shm_bytes, processes=args.processes, files=args.files, tail_bytes=args.tail_bytes)


def main(argv: list[str] | None = None) -> int:
    config = _parse(sys.argv[1:] if argv is None else argv)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    policy_runtime.warm_up()  # what a Program may need beyond the Episode's start: imported once, here
    zygote = Zygote(config)
    gc.collect()
    gc.freeze()  # what the runtime made stays put: a child's collections do not write to the shared pages
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(config.control + ".new")
    listener.listen(1)
    problem = zygote.self_check()
    if thread_count() != 1:
        problem = problem or f"the zygote has {thread_count()} threads after start-up"
    os.rename(config.control + ".new", config.control)  # appears only once it can be connected to
    if problem:
        connection, _ = listener.accept()
        connection.sendall(json.dumps({"op": "refused", "reason": problem}).encode() + b"\n")
        connection.close()
        return 1
    zygote.serve(listener)
    return 0


if __name__ == "__main__":
    sys.exit(main())
