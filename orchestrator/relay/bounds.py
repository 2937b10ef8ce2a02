"""The relay's bounds on what the agent can make the Host hold: connections, requests in flight, time, refusals, record size."""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1024 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class RelayBounds:
    """How much of the Host one relay may be made to use; past a limit the agent phase ends.

    max_connections: agent connections served at once (one Host thread each); a connection beyond is closed at once
    and counted. max_in_flight: requests past their head checks at once (reading their body, or forwarded); one
    beyond is refused with 503. idle_timeout_s: the longest a connection may wait for its next request, and the
    longest one write of a response to the agent may block. read_timeout_s: the longest a request's head and body may
    take to arrive, counted from its first byte (a trickling request is refused when it passes). max_head_bytes: the
    request line and headers together. max_refused, max_refused_bytes, max_refused_connections: refused requests, the
    bytes read of them, and connections closed over max_connections, before the relay's limit is reached.
    max_record_bytes: the Run's exchange records (every relay/exchanges.N.jsonl) together: past it entries lose their
    bodies and the limit is reached. default_output_tokens: the output a request without its own cap reserves
    against relay.max_tokens.
    """

    max_connections: int = 64
    max_in_flight: int = 8
    idle_timeout_s: float = 300.0
    read_timeout_s: float = 30.0
    max_head_bytes: int = 64 * 1024
    max_refused: int = 256
    max_refused_bytes: int = 64 * MIB
    max_refused_connections: int = 1024
    max_record_bytes: int = 256 * MIB
    default_output_tokens: int = 32768
