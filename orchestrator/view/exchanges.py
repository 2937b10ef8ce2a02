"""The agent's model exchanges as a readable conversation, from the relay's records (`relay/exchanges.N.jsonl`): each
request's last messages, the reply's text and tool calls in the shapes the providers use (Anthropic Messages, OpenAI
Chat Completions and Responses, Gemini; whole or streamed as server-sent events), with status, seconds and tokens.

The records are read a line at a time through `records.safe_read.stream_lines`, bounded in all and per line; a body of
a shape none of these is shown as its text, and one that cannot be taken apart at all as a note.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from orchestrator.records import safe_read
from orchestrator.records.schema import RecordError, finite_number
from orchestrator.reports.run_records import relay_files
from orchestrator.view.shown import MAX_TEXT, cleaned, visible

MAX_EXCHANGES = 200  # model exchanges shown of a Run (the latest)
MAX_EXCHANGE_TEXT = 20_000  # characters of one message or reply shown
MAX_RELAY_READ = 256 * safe_read.MiB  # bytes of relay records read for one Run page
MAX_RELAY_LINE = 8 * safe_read.MiB  # one exchange's line; longer ones are skipped


def exchanges(root: Path) -> dict[str, Any]:
    """The latest MAX_EXCHANGES model exchanges of the Run's relay records, each as a readable message and reply."""
    try:
        files = relay_files(root)
    except RecordError as exc:
        return {"items": [], "problem": visible(exc.reason), "total": 0}
    items: list[dict[str, Any]] = []
    total = 0
    spent = [0]
    for attempt, relative in files:
        try:
            for line in safe_read.stream_lines(root, relative, max_bytes=max(0, MAX_RELAY_READ - spent[0]), max_line=MAX_RELAY_LINE, spent=spent):
                try:
                    entry = json.loads(line)
                except (json.JSONDecodeError, RecursionError):
                    continue
                if isinstance(entry, dict):
                    total += 1
                    try:
                        items.append(_exchange(attempt, entry))
                    except (RecursionError, TypeError, ValueError, AttributeError) as exc:  # a body of a shape none expects
                        items.append({**_exchange(attempt, {k: entry.get(k) for k in ("seq", "method", "path", "status")
                                                            if isinstance(entry.get(k), (str, int))}),
                                      "error": visible(f"not shown: {type(exc).__name__}", 200)})
                    del items[:-MAX_EXCHANGES]
        except RecordError:
            continue
    return {"items": items, "problem": "", "total": total}


def _exchange(attempt: int, entry: dict[str, Any]) -> dict[str, Any]:
    request, response = str(entry.get("request") or ""), str(entry.get("response") or "")
    time = entry.get("time")
    return {"attempt": attempt, "seq": cleaned(entry.get("seq")), "time": finite_number(time) if isinstance(time, (int, float)) else None,
            "method": visible(str(entry.get("method") or ""), 20), "path": visible(str(entry.get("path") or ""), 300),
            "status": cleaned(entry.get("status")), "seconds": cleaned(entry.get("seconds")), "tokens": cleaned(entry.get("tokens")),
            "refused": visible(str(entry.get("refused") or ""), 600), "error": visible(str(entry.get("error") or ""), 600),
            "omitted": visible(str(entry.get("omitted") or ""), 300),
            "messages": _request_messages(request), "reply": _reply(response),
            "request_bytes": len(request), "response_bytes": len(response)}


def _text_of(content: Any) -> str:
    """The text of a message's content in any of the providers' shapes: a string, or parts holding text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content[:200]:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict):
                if isinstance(part.get("text"), str):
                    texts.append(part["text"])
                elif part.get("type") in ("tool_result", "function_call_output"):
                    texts.append(f"[{part.get('type')}] " + _text_of(part.get("content", part.get("output", ""))))
                elif part.get("type") in ("tool_use", "function_call"):
                    texts.append(f"[call {part.get('name')}] " + json.dumps(part.get("input", part.get("arguments", "")), default=str)[:MAX_TEXT])
        return "\n".join(texts)
    return ""


def _request_messages(request: str) -> list[dict[str, str]]:
    """The last three messages of a request (role and text), or the request's start when it is not JSON."""
    try:
        document = json.loads(request) if request else {}
    except (json.JSONDecodeError, RecursionError):
        return [{"role": "request", "text": visible(request, MAX_EXCHANGE_TEXT)}]
    if not isinstance(document, dict):
        return [{"role": "request", "text": visible(request, MAX_EXCHANGE_TEXT)}]
    messages = document.get("messages") or document.get("input") or document.get("contents") or []
    if isinstance(messages, str):
        messages = [{"role": "user", "content": messages}]
    shown = []
    for message in messages[-3:] if isinstance(messages, list) else []:
        if not isinstance(message, dict):
            continue
        content = message.get("content", message.get("parts", message.get("output", "")))
        role = str(message.get("role") or message.get("type") or "")
        shown.append({"role": visible(role, 40), "text": visible(_text_of(content) or json.dumps(message, default=str), MAX_EXCHANGE_TEXT)})
    model = document.get("model")
    if model is not None:
        shown.insert(0, {"role": "model", "text": visible(str(model), 200)})
    return shown


def _reply(response: str) -> list[dict[str, str]]:
    """The reply's text and tool calls (Anthropic, OpenAI chat and Responses, Gemini shapes, a stream of them too)."""
    if not response:
        return []
    documents: list[Any] = []
    if response.lstrip().startswith(("event:", "data:")):
        for line in response.splitlines()[:20_000]:
            if line.startswith("data:"):
                try:
                    documents.append(json.loads(line[5:].strip()))
                except (json.JSONDecodeError, RecursionError):
                    continue
    else:
        try:
            documents = [json.loads(response)]
        except (json.JSONDecodeError, RecursionError):
            return [{"kind": "text", "name": "", "text": visible(response, MAX_EXCHANGE_TEXT)}]
    parts: list[dict[str, str]] = []
    streamed: list[str] = []
    for document in documents:
        if isinstance(document, dict):
            _reply_parts(document, parts, streamed)
    if streamed:
        parts.insert(0, {"kind": "text", "name": "", "text": "".join(streamed)})
    return [{"kind": p["kind"], "name": visible(p["name"], 200), "text": visible(p["text"], MAX_EXCHANGE_TEXT)} for p in parts[:100]] or [
        {"kind": "text", "name": "", "text": visible(response, MAX_EXCHANGE_TEXT)}]


def _reply_parts(document: dict[str, Any], parts: list[dict[str, str]], streamed: list[str]) -> None:
    delta = document.get("delta")
    if isinstance(delta, dict) and isinstance(delta.get("text"), str):  # Anthropic stream
        streamed.append(delta["text"])
    elif isinstance(delta, str) and str(document.get("type", "")).endswith("output_text.delta"):  # Responses stream
        streamed.append(delta)
    for item in document.get("content") or [] if isinstance(document.get("content"), list) else []:  # Anthropic message
        if isinstance(item, dict):
            if item.get("type") == "tool_use":
                parts.append({"kind": "tool_call", "name": str(item.get("name", "")), "text": json.dumps(item.get("input"), default=str)})
            elif isinstance(item.get("text"), str):
                parts.append({"kind": "text", "name": "", "text": item["text"]})
    for choice in document.get("choices") or [] if isinstance(document.get("choices"), list) else []:  # OpenAI chat
        if not isinstance(choice, dict):
            continue
        message = choice.get("message") or choice.get("delta") or {}
        if isinstance(message, dict):
            if isinstance(message.get("content"), str) and message["content"]:
                (streamed.append(message["content"]) if "delta" in choice else
                 parts.append({"kind": "text", "name": "", "text": message["content"]}))
            calls = message.get("tool_calls")
            for call in calls if isinstance(calls, list) else []:
                function = call.get("function", {}) if isinstance(call, dict) else {}
                if isinstance(function, dict) and function.get("name"):
                    parts.append({"kind": "tool_call", "name": str(function.get("name")), "text": str(function.get("arguments", ""))})
    response = document.get("response") if isinstance(document.get("response"), dict) else document
    if isinstance(response, dict) and isinstance(response.get("output"), list) and not streamed:  # Responses
        for item in response["output"]:
            if not isinstance(item, dict):
                continue
            if item.get("type") == "function_call":
                parts.append({"kind": "tool_call", "name": str(item.get("name", "")), "text": str(item.get("arguments", ""))})
            elif item.get("type") == "message":
                parts.append({"kind": "text", "name": "", "text": _text_of(item.get("content"))})
    for candidate in document.get("candidates") or [] if isinstance(document.get("candidates"), list) else []:  # Gemini
        content = candidate.get("content") if isinstance(candidate, dict) else None
        for part in (content or {}).get("parts") or [] if isinstance(content, dict) else []:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                streamed.append(part["text"])
            elif isinstance(part, dict) and isinstance(part.get("functionCall"), dict):
                call = part["functionCall"]
                parts.append({"kind": "tool_call", "name": str(call.get("name", "")), "text": json.dumps(call.get("args"), default=str)})
