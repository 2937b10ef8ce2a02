"""The runner's slot socket appears under its name only once the policy's unprivileged user may connect to it."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path
from typing import Any

import pytest

from epg.v1 import runner_pb2
from epg_sdk.runtime import runner


class _Context:
    def abort(self, code: Any, details: str) -> None:
        raise AssertionError(f"aborted: {code} {details}")


def _connects(path: Path) -> bool:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(str(path))
        return True
    except OSError:
        return False
    finally:
        probe.close()


def test_the_slot_socket_is_never_seen_before_it_is_open_to_the_policy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "p").mkdir()
    final = tmp_path / "p" / runner.SOCKET_NAME
    seen: list[str] = []
    real_chmod, real_rename = os.chmod, os.rename

    def chmod(path: Any, mode: int, *args: Any, **kwargs: Any) -> None:
        # What a policy polling for the socket would meet now: the name must not exist yet.
        seen.append(f"chmod, the name {'exists' if final.exists() else 'absent'}")
        real_chmod(path, mode, *args, **kwargs)

    def rename(source: Any, target: Any) -> None:
        mode = stat.S_IMODE(os.stat(source).st_mode)
        seen.append(f"rename of a socket in mode {mode:o}, {'listening' if _connects(Path(source)) else 'not listening'}")
        real_rename(source, target)

    monkeypatch.setattr(os, "chmod", chmod)
    monkeypatch.setattr(os, "rename", rename)
    service = runner.RunnerService(benchmark=None, exchange=tmp_path)  # type: ignore[arg-type]  # PrepareSlot uses none
    response = service.PrepareSlot(runner_pb2.PrepareSlotRequest(slot="p"), _Context())  # type: ignore[arg-type]
    assert seen == ["chmod, the name absent", "rename of a socket in mode 666, listening"]
    assert response.socket_path == str(final)
    assert stat.S_ISSOCK(os.lstat(final).st_mode) and stat.S_IMODE(os.lstat(final).st_mode) == 0o666
    assert sorted(p.name for p in (tmp_path / "p").iterdir()) == [runner.SOCKET_NAME]
    assert _connects(final)
    taken = service._take_slot("p")
    assert taken is not None
    taken.close()
