"""Tokens a provider's response reports in its usage: a JSON body or server-sent events (OpenAI, Anthropic, Gemini)."""

from __future__ import annotations

import json
from typing import Any


def count_tokens(body: bytes) -> int:
    """Tokens reported by a provider response: a JSON body or server-sent events (OpenAI, Anthropic or Gemini usage)."""
    total = gemini = 0
    texts = [body]
    if b"\ndata:" in body or body.startswith(b"data:") or body.startswith(b"event:"):
        texts = [line[5:].strip() for line in body.splitlines() if line.startswith(b"data:")]
    for text in texts:
        try:
            document = json.loads(text)
        except (ValueError, UnicodeDecodeError):
            continue
        total += _usage_tokens(document)
        metadata = document.get("usageMetadata") if isinstance(document, dict) else None
        if isinstance(metadata, dict) and isinstance(metadata.get("totalTokenCount"), int):
            gemini = max(gemini, metadata["totalTokenCount"])  # Gemini: streamed chunks repeat the running total
    return total + gemini


def _usage_tokens(document: Any) -> int:
    if not isinstance(document, dict):
        return 0
    usage = document.get("usage")
    if usage is None and isinstance(document.get("response"), dict):
        usage = document["response"].get("usage")  # OpenAI Responses: response.completed
    if usage is None and isinstance(document.get("message"), dict):
        usage = document["message"].get("usage")  # Anthropic: message_start
    if not isinstance(usage, dict):
        return 0
    total = usage.get("total_tokens")
    if isinstance(total, int):
        return total
    return sum(v for k, v in usage.items() if k in ("input_tokens", "output_tokens") and isinstance(v, int))
