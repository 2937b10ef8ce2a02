"""How a forked Episode sandbox sets itself up: namespaces, a fresh root, limits, no privilege left.

Called in the zygote's children only (epg_sdk.runtime.zygote), never in the zygote (but clone_into_namespaces,
which makes them): each step changes the calling process for good. The kernel interfaces Python 3.11's os module
lacks (clone with flags, mount, pivot_root, capset, prctl) are called through libc with ctypes.

Imports: the standard library only.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
from dataclasses import dataclass

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
SANDBOX_NAMESPACES = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET

MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_NOATIME = 0x400
MS_NODIRATIME = 0x800
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
MS_RELATIME = 0x200000
MNT_DETACH = 0x2
ST_NOATIME = 0x400
ST_NODIRATIME = 0x800
ST_RELATIME = 0x1000

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_SECUREBITS = 28
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
# SECBIT_NOROOT, SECBIT_NO_SETUID_FIXUP, SECBIT_KEEP_CAPS_LOCKED, SECBIT_NO_CAP_AMBIENT_RAISE, each with its lock.
SECUREBITS_LOCKED_DOWN = 0x01 | 0x02 | 0x04 | 0x08 | 0x20 | 0x40 | 0x80
LINUX_CAPABILITY_VERSION_3 = 0x20080522
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
SYS_CAPSET = {"x86_64": 126, "aarch64": 91}
SYS_CLONE = {"x86_64": 56, "aarch64": 220}

SANDBOX_TMP = "/tmp"  # the lane container's own /tmp: the staging point of a sandbox's new root, in its mount namespace
DEVICES = ("null", "zero", "urandom", "random")

_libc = ctypes.CDLL(None, use_errno=True)


class SetupError(OSError):
    """A step of a sandbox's set-up the kernel refused: which one and why (errno)."""


def _check(result: int, step: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise SetupError(code, f"{step}: {os.strerror(code)}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Layout:
    """What a sandbox's root holds: read-only binds (path -> the same path inside), symbolic links (path -> target)
    and its own directories, and the bounds of its tmpfs mounts."""

    binds: tuple[str, ...]
    links: tuple[tuple[str, str], ...]
    io_source: str  # the slot's directory of the lane's exchange: /epg/io inside, read-only
    program_source: str  # the slot's Program directory: /epg/program inside, read-only
    tmpfs_bytes: int
    shm_bytes: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """The rlimits of a sandbox: processes (its user namespace's), open files, file size, CPU seconds (a backstop;
    the runner's deadlines come first). Core dumps are always off."""

    processes: int
    files: int
    file_bytes: int
    cpu_seconds: int


def root_layout(paths: list[str]) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """The binds and links a sandbox's root needs for the runtime found at paths (sys.path and the like): /usr and
    /etc, top-level links such as /lib -> usr/lib kept as links, and every further directory of paths not below a
    bind already. Pure but for reading the file system's links."""
    binds: list[str] = ["/usr", "/etc"]
    links: list[tuple[str, str]] = []
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            links.append((top, os.readlink(top)))
        elif os.path.isdir(top):
            binds.append(top)
    for path in paths:
        real = os.path.realpath(path) if path else ""
        if not real.startswith("/") or not os.path.isdir(real) or real == "/":
            continue
        if not any(real == bind or real.startswith(bind + "/") for bind in binds):
            binds.append(real)
    return tuple(binds), tuple(links)


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None, step: str) -> None:
    """mount(2); raises SetupError naming step."""
    _check(_libc.mount(source and source.encode(), target.encode(), fstype and fstype.encode(), ctypes.c_ulong(flags),
                       data and data.encode()), step)


def clone_into_namespaces() -> int:
    """Fork into new user, mount, PID, IPC, UTS and network namespaces at once (clone(2), as fork does but with the
    namespace flags): return 0 in the child, PID 1 of its PID namespace, and its pid in the parent. The child must
    then map_own_ids before anything else. Raises SetupError.

    Python's own fork hooks do not run: the caller is single-threaded (no lock can be held by another thread) and
    the child reseeds what at-fork hooks would have."""
    pid = int(_libc.syscall(SYS_CLONE[os.uname().machine], ctypes.c_ulong(SANDBOX_NAMESPACES | signal.SIGCHLD),
                            None, None, None, None))
    if pid < 0:
        code = ctypes.get_errno()
        raise SetupError(code, f"clone into new user, mount, PID, IPC, UTS and network namespaces: {os.strerror(code)}")
    return pid


def map_own_ids(uid: int, gid: int) -> None:
    """In a new user namespace: map uid and gid (this process's outside it) to themselves inside, setgroups denied."""
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as file:
            file.write(text)


def _bind_read_only(source: str, target: str) -> None:
    # Recursive: a bind of a directory under which the lane container has mounts (/etc/hosts) must take them along.
    mount(source, target, None, MS_BIND | MS_REC, None, f"bind of {source}")
    # A remount may add restrictions, never lift the ones the lane container's mount carries (locked in a user
    # namespace): keep its noexec and atime flags.
    found = os.statvfs(source).f_flag
    flags = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | (found & MS_NOEXEC)
    flags |= (MS_NOATIME if found & ST_NOATIME else 0) | (MS_NODIRATIME if found & ST_NODIRATIME else 0)
    flags |= MS_RELATIME if found & ST_RELATIME else 0
    mount(None, target, None, flags, None, f"read-only remount of {source}")


def _make_point(path: str, directory: bool) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if directory:
        os.makedirs(path, exist_ok=True)
    else:
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))


def build_root(layout: Layout) -> None:
    """Make a fresh root of layout and pivot into it; the lane container's root is detached. Raises SetupError."""
    mount(None, "/", None, MS_REC | MS_PRIVATE, None, "making the mount tree private")
    root = SANDBOX_TMP
    mount("sandbox", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755", "the root tmpfs")
    for path in layout.binds:
        _make_point(root + path, True)
        _bind_read_only(path, root + path)
    for path, target in layout.links:
        os.symlink(target, root + path)
    for source, inside in ((layout.io_source, "/epg/io"), (layout.program_source, "/epg/program")):
        _make_point(root + inside, True)
        _bind_read_only(source, root + inside)
    _make_point(root + "/dev", True)
    mount("dev", root + "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,mode=0755", "the /dev tmpfs")
    for device in DEVICES:
        _make_point(f"{root}/dev/{device}", False)
        mount(f"/dev/{device}", f"{root}/dev/{device}", None, MS_BIND, None, f"bind of /dev/{device}")
    _make_point(root + "/dev/shm", True)
    mount("shm", root + "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, f"size={layout.shm_bytes},mode=1777", "the /dev/shm tmpfs")
    mount(None, root + "/dev", None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC, None, "read-only /dev")
    _make_point(root + "/tmp", True)
    mount("tmp", root + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"size={layout.tmpfs_bytes},mode=1777", "the /tmp tmpfs")
    os.chdir(root)
    _check(_libc.syscall(SYS_PIVOT_ROOT[os.uname().machine], b".", b"."), "pivot_root")
    _check(_libc.umount2(b".", MNT_DETACH), "detaching the lane container's root")
    os.chdir("/")
    mount(None, "/", None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, None, "read-only root")


def set_limits(limits: Limits) -> None:
    """Set the sandbox's rlimits (soft = hard: the Program cannot raise them)."""
    for which, value in ((resource.RLIMIT_NPROC, limits.processes), (resource.RLIMIT_NOFILE, limits.files),
                         (resource.RLIMIT_FSIZE, limits.file_bytes), (resource.RLIMIT_CORE, 0),
                         (resource.RLIMIT_CPU, limits.cpu_seconds)):
        resource.setrlimit(which, (value, value))


def die_with_parent() -> None:
    """Be killed when the parent (the zygote) dies. Should it die before this, the lane container stops and its
    processes with it."""
    _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "PR_SET_PDEATHSIG")


def no_core_dumps() -> None:
    """No core dump of this process or its children, wherever the kernel's core_pattern points."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    _check(_libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "PR_SET_DUMPABLE")


def keep_only(keep: list[int]) -> None:
    """Close every descriptor but keep's."""
    low = 0
    for fd in sorted(set(keep)):
        if fd > low:
            os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 1 << 20)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_privileges(last_capability: int) -> None:
    """Lock the securebits, empty the bounding, ambient, effective, permitted and inheritable capability sets and set
    no_new_privs. Raises SetupError."""
    _check(_libc.prctl(PR_SET_SECUREBITS, SECUREBITS_LOCKED_DOWN, 0, 0, 0), "PR_SET_SECUREBITS")
    for capability in range(last_capability + 1):
        _check(_libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0), f"PR_CAPBSET_DROP {capability}")
    _check(_libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "PR_CAP_AMBIENT_CLEAR_ALL")
    header = _CapHeader(LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(_libc.syscall(SYS_CAPSET[os.uname().machine], ctypes.byref(header), data), "capset")
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "PR_SET_NO_NEW_PRIVS")


