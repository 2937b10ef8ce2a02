"""A hostile workspace writer: exchanges two paths with renameat2(RENAME_EXCHANGE) as fast as it can.

Standard library only: the same source runs on the Host in unit tests and
inside an agent container (`python3 swapper.py A B SECONDS`).
"""

from __future__ import annotations

import ctypes
import os
import sys
import time

AT_FDCWD = -100
RENAME_EXCHANGE = 2


def exchanger():
    """Return exchange(a, b): swap two paths atomically. Raises OSError."""
    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = libc.renameat2
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]

    def exchange(a: str, b: str) -> None:
        if renameat2(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) != 0:
            error = ctypes.get_errno()
            raise OSError(error, os.strerror(error), a)

    return exchange


def swap_for(a: str, b: str, seconds: float) -> int:
    """Exchange a and b until seconds have passed; return how many exchanges were made."""
    exchange = exchanger()
    count, deadline = 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        for _ in range(64):
            exchange(a, b)
            count += 1
    if count % 2:
        exchange(a, b)  # leave both where they started
        count += 1
    return count


if __name__ == "__main__":
    print(swap_for(sys.argv[1], sys.argv[2], float(sys.argv[3])))
