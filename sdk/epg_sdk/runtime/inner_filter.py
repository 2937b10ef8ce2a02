"""The inner seccomp filter of a forked Episode sandbox: what its Program may not ask the kernel for.

Built once by the zygote (libseccomp's Python binding, Debian's python3-seccomp) and loaded by every sandbox's
PID 1 after it has set itself up and before the Program's first line. It stacks on the lane container's outer
profile (Docker's default allow-list plus namespace creation): the kernel applies both, so the sandbox may do
what both allow, which is less than Docker's default allows a policy container. ARCHITECTURE.md ("Forked Episode
sandboxes") reviews the list.

Imports: the standard library and `seccomp` (on first use).
"""

from __future__ import annotations

import errno
import importlib
import socket
from typing import Any

# Namespace flags of clone(2)/unshare(2): CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER,
# CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWTIME.
CLONE_NAMESPACE_FLAGS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000, 0x00000080)

# Refused with EPERM: leaving the sandbox's namespaces or making new ones, changing mounts, reading or writing
# another process, kernel facilities with a history of privilege escalations, and the new mount API.
DENIED = (
    "unshare", "setns",
    "mount", "umount2", "pivot_root", "chroot", "mount_setattr",
    "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick",
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd", "process_madvise",
    "bpf", "perf_event_open", "userfaultfd",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "keyctl", "add_key", "request_key",
    "name_to_handle_at", "open_by_handle_at", "fanotify_init",
    "personality", "acct", "quotactl", "syslog", "vhangup",
)
# clone3 passes its flags in memory a filter cannot read: ENOSYS, so that libc falls back to clone, whose flags it can.
NOT_IMPLEMENTED = ("clone3",)


def build() -> Any:
    """Return the inner filter, a `seccomp.SyscallFilter` ready to `load()` (default: allow; Docker's outer profile
    denies what is not in its allow-list). Raises ImportError when python3-seccomp is missing."""
    seccomp = importlib.import_module("seccomp")  # Debian's binding: in the policy-runtime image, not the Host's venv
    rules = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    deny = seccomp.ERRNO(errno.EPERM)
    for name in DENIED:
        rules.add_rule(deny, name)
    for name in NOT_IMPLEMENTED:
        rules.add_rule(seccomp.ERRNO(errno.ENOSYS), name)
    for flag in CLONE_NAMESPACE_FLAGS:
        rules.add_rule(deny, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
    # Only unix sockets: no network namespace holds more than loopback, but the kernel's other socket families
    # (netlink, packet, vsock, ...) are attack surface an Episode has no use for.
    refuse_family = seccomp.ERRNO(errno.EAFNOSUPPORT)
    for name in ("socket", "socketpair"):
        rules.add_rule(refuse_family, name, seccomp.Arg(0, seccomp.NE, socket.AF_UNIX))
    # TIOCSTI and TIOCLINUX push input into a terminal; an Episode has none, but a descriptor might be one.
    for request in (0x5412, 0x541C):
        rules.add_rule(deny, "ioctl", seccomp.Arg(1, seccomp.MASKED_EQ, 0xFFFFFFFF, request))
    return rules
