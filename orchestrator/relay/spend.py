"""Token reservations: what a request may spend at most, held against relay.max_tokens while it is in flight."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Where each API puts a request's own output cap: Anthropic Messages and Chat Completions (max_tokens), OpenAI
# Responses (max_output_tokens), Chat Completions (max_completion_tokens), Gemini (generationConfig.maxOutputTokens).
_CAP_KEYS = ("max_tokens", "max_output_tokens", "max_completion_tokens")


def output_cap(document: Any) -> int | None:
    """The largest output cap the request's JSON body names, or None when it names none (or the body is not an object)."""
    if not isinstance(document, dict):
        return None
    caps = [document.get(key) for key in _CAP_KEYS]
    config = document.get("generationConfig") or document.get("generation_config")
    if isinstance(config, dict):
        caps += [config.get("maxOutputTokens"), config.get("max_output_tokens")]
    found = [cap for cap in caps if isinstance(cap, int) and not isinstance(cap, bool) and cap >= 0]
    return max(found) if found else None


def reservation(body: bytes, document: Any, default_output: int) -> int:
    """The most tokens one request can be charged: its input, bounded by its body's bytes (a token covers at least one
    byte of text, and an image or audio part counts fewer tokens than its encoded bytes), plus its output cap or
    default_output when it names none. A request without a body (GET) reserves nothing."""
    if not body:
        return 0
    cap = output_cap(document)
    return len(body) + (default_output if cap is None else cap)


@dataclass(slots=True)
class TokenLedger:
    """Tokens counted from completed responses and tokens reserved by requests in flight. Not locked: its owner's
    lock guards it (the relay's)."""

    limit: int | None
    counted: int = 0
    reserved: int = 0

    def exhausted(self) -> bool:
        """Whether the counted tokens alone have reached the limit."""
        return self.limit is not None and self.counted >= self.limit

    def reserve(self, tokens: int) -> bool:
        """Hold tokens for one request if they fit beside what is counted and reserved; return whether they were held."""
        if self.limit is not None and self.counted + self.reserved + tokens > self.limit:
            return False
        self.reserved += tokens
        return True

    def never_fits(self, tokens: int) -> bool:
        """Whether a reservation of tokens could not be held even with nothing else in flight."""
        return self.limit is not None and self.counted + tokens > self.limit

    def settle(self, reserved: int, used: int) -> None:
        """Release a request's reservation and count what its response reported."""
        self.reserved -= reserved
        self.counted += used
