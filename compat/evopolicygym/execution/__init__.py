"""Execution settings: ProcessExecution, the explicit acknowledgement that evaluate() runs a Program without isolation."""

from __future__ import annotations

from typing import NoReturn


class ProcessExecution:
    """Consent to run a Program in the calling process, unisolated: it can do anything the calling user can.

    Made only with ProcessExecution.unsafe(); the constructor raises TypeError. Sandboxed evaluation, one hardened
    container per Episode, is `epg-orchestrate evaluate`.
    """

    __slots__ = ()

    def __init__(self) -> None:
        raise TypeError("use ProcessExecution.unsafe()")

    @classmethod
    def unsafe(cls) -> ProcessExecution:
        """Return the acknowledgement."""
        return object.__new__(cls)

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError("ProcessExecution is immutable")

    def __eq__(self, other: object) -> bool:
        return type(other) is ProcessExecution

    def __hash__(self) -> int:
        return hash(ProcessExecution)

    def __repr__(self) -> str:
        return "ProcessExecution.unsafe()"


__all__ = ["ProcessExecution"]
