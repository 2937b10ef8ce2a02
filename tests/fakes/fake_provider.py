#!/usr/bin/env python3
"""Scripted fake model provider for driving coding-agent CLIs offline.

Speaks just enough of two wire protocols to run a full agent loop:

* OpenAI Responses API  (``POST /v1/responses``, streamed as SSE) -- used by
  the Codex CLI (``@openai/codex``).  ``GET /v1/models`` is answered too.
* Anthropic Messages API (``POST /v1/messages``, streamed as SSE, plus
  ``POST /v1/messages/count_tokens``) -- used by Claude Code
  (``@anthropic-ai/claude-code``).
* Gemini API (``POST /v1beta/models/MODEL:generateContent``, and
  ``:streamGenerateContent?alt=sse`` streamed as unnamed SSE events, plus
  ``:countTokens``) -- used by Gemini CLI (``@google/gemini-cli``).
* OpenAI Chat Completions (``POST /v1/chat/completions``, streamed as SSE
  chunks ending ``data: [DONE]``) -- used by Qwen Code
  (``@qwen-code/qwen-code``), opencode (``opencode-ai``), Cline (``cline``),
  mini-SWE-agent (``mini-swe-agent``) and Aider (``aider-chat``, shell
  commands in the answer's text instead of tool calls: see ``text_client``).

The conversation follows a SCRIPT, a JSON file of the form::

    {"turns": [
        {"shell": "cat TASK.md"},
        {"shell": "echo hi > out.txt", "text": "optional text shown before the call"},
        {"text": "All done."}
    ]}

Each turn is either a shell command (emitted as the CLI's own shell tool call),
a call of a tool of the Host API's MCP server, or a final text answer::

        {"mcp": "submit", "args": {"episodes": "0:4"}, "shell": "epg-session submit --episodes 0:4"}

An "mcp" turn calls the tool of that name that the CLI offers for the MCP
server ``epg`` (each CLI names it its own way: ``mcp__epg__submit`` for
Claude Code and Qwen Code, ``mcp_epg_submit`` for Gemini CLI, ``epg_submit``
for opencode, ``epg__submit`` for Cline, plain ``submit`` in Codex's
namespace) with "args" as given; a CLI that
offers no such tool plays the turn's "shell" command instead, when it has one.  The turn to play is derived from the request itself:
it is the number of tool results for calls *this server issued* that the
request carries.  So a CLI that retries a request gets the same answer again,
and each request that carries the previous tool result advances by one turn.
Past the last turn, the last text turn (or "Done.") is repeated.

Requests that do not offer the shell tool (title generation, quota probes,
summaries and other side calls) are "auxiliary": they get a short plain-text
answer and do not advance the script.

The shell tool is discovered from the request's ``tools`` field:

* Codex: the first of ``exec_command`` / ``shell_command`` / ``shell``
  (function tools) found; arguments are shaped after its JSON schema
  (``{"cmd": "..."}``, ``{"command": "..."}`` or
  ``{"command": ["bash", "-lc", "..."]}``).
* Claude Code: the ``Bash`` tool, input ``{"command": "...",
  "description": "..."}``.
* Gemini CLI: the ``run_shell_command`` function declaration; Qwen Code: the
  ``run_shell_command`` (or ``shell``) function tool; arguments
  ``{"command": "..."}`` plus a ``description`` where the schema has one.

Every request (method, path, headers, parsed body) and every response
(status, the JSON body or the list of SSE events) is appended to a JSONL log.

Stdlib only.  Binds to 127.0.0.1 only.

Usage::

    python3 fake_provider.py --script script.json --log requests.jsonl \
        [--port 0] [--port-file port.txt]

With ``--port 0`` an ephemeral port is chosen; it is printed on stdout
("listening on 127.0.0.1:PORT") and written to ``--port-file`` if given.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable
from urllib.parse import urlsplit

# Prefixes for ids of the tool calls this server issues.  Only results for
# calls with these ids count as progress through the script.
OPENAI_CALL_PREFIX = "call_fake_"
ANTHROPIC_CALL_PREFIX = "toolu_fake_"

GEMINI_CALL_PREFIX = "gcall_fake_"

CODEX_SHELL_TOOLS = ("exec_command", "shell_command", "shell")
CLAUDE_SHELL_TOOL = "Bash"
GEMINI_SHELL_TOOLS = ("run_shell_command", "shell")
MCP_SERVER = "epg"
MCP_TOOLS = ("status", "submit", "feedback", "finish")


def declared_tools(body: dict) -> dict[str, dict]:
    """Every tool a request offers, by name, in any of the four APIs' shapes (Gemini's functionDeclarations, Chat
    Completions' {"function": ...}, a plain named tool, or a Responses namespace's "tools": Codex offers an MCP
    server's tools so, in the namespace mcp__SERVER; those are named NAMESPACE__TOOL here and their declaration
    copies carry "namespace", which the call must name)."""
    declared: dict[str, dict] = {}

    def add(items, namespace: str = "") -> None:
        for item in items or []:
            if not isinstance(item, dict):
                continue
            if "functionDeclarations" in item:
                add(item["functionDeclarations"])
            elif isinstance(item.get("function"), dict):
                declared.setdefault(item["function"].get("name"), item["function"])
            elif item.get("type") == "namespace" and isinstance(item.get("tools"), list):
                add(item["tools"], str(item.get("name") or ""))
            elif item.get("name") and namespace:
                declared.setdefault(f"{namespace.rstrip('_')}__{item['name']}", dict(item, namespace=namespace))
            elif item.get("name"):
                declared.setdefault(item["name"], item)

    add(body.get("tools"))
    return declared


def is_mcp_tool(name: str, tool: str) -> bool:
    """Whether a CLI's tool name is the MCP server's tool `tool` (mcp__epg__submit, mcp_epg_submit, epg_submit,
    epg__submit, submit)."""
    return name == tool or (name.endswith("_" + tool) and MCP_SERVER in name.removesuffix(tool).strip("_").split("_"))


def mcp_call(turn: dict | None, body: dict) -> tuple[dict, dict] | None:
    """(the offered tool's declaration, its arguments) of an "mcp" turn, or None (no such turn, or no such tool)."""
    if not turn or "mcp" not in turn:
        return None
    for name, declaration in declared_tools(body).items():
        if name and is_mcp_tool(name, turn["mcp"]):
            return declaration, turn.get("args") or {}
    return None


# Chat Completions clients: Qwen Code (run_shell_command), opencode and mini-SWE-agent (bash), Cline (run_commands).
CHAT_SHELL_TOOLS = ("run_shell_command", "shell", "bash", "run_commands")


# --------------------------------------------------------------------------
# Script
# --------------------------------------------------------------------------

class Script:
    """A list of turns: {"shell": CMD[, "text": PREAMBLE]}, {"mcp": TOOL, "args": {...}[, "shell": CMD][, "text": ...]}
    or {"text": TEXT}."""

    def __init__(self, turns: list[dict]):
        for i, t in enumerate(turns):
            if not isinstance(t, dict) or not ("shell" in t or "text" in t or "mcp" in t):
                raise ValueError(f"turn {i}: need a 'shell', 'mcp' or 'text' key: {t!r}")
        self.turns = turns

    @classmethod
    def load(cls, path: str) -> "Script":
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        if isinstance(data, dict):
            data = data["turns"]
        return cls(data)

    def turn(self, index: int) -> dict:
        if index < len(self.turns):
            return self.turns[index]
        texts = [t for t in self.turns if "shell" not in t and "mcp" not in t]
        return texts[-1] if texts else {"text": "Done."}


# --------------------------------------------------------------------------
# Logging
# --------------------------------------------------------------------------

class JsonlLog:
    def __init__(self, path: str | None):
        self.path = path
        self.lock = threading.Lock()
        self.seq = 0

    def next_seq(self) -> int:
        with self.lock:
            self.seq += 1
            return self.seq

    def write(self, record: dict) -> None:
        if not self.path:
            return
        line = json.dumps(record, ensure_ascii=False)
        with self.lock:
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(line + "\n")


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------

def _chunks(text: str, size: int = 24) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def _approx_tokens(obj) -> int:
    return max(1, len(json.dumps(obj)) // 4)


def _first_named(declared: dict, names: tuple[str, ...]) -> dict | None:
    """The declaration of the first of `names` that `declared` (tool declarations by name) holds, or None."""
    for name in names:
        if name in declared:
            return declared[name]
    return None


def _shell_args_from_schema(tool: dict, command: str) -> dict:
    """Build Codex shell-tool arguments that fit the tool's JSON schema."""
    params = tool.get("parameters") or {}
    props = params.get("properties") or {}
    if "cmd" in props:                       # exec_command (unified exec)
        # Wait for the command as long as the CLI allows (it caps the value) before it yields a still-running
        # process, so a slow command on a loaded machine finishes within its turn.
        return {"cmd": command, "yield_time_ms": 300_000} if "yield_time_ms" in props else {"cmd": command}
    spec = props.get("command") or {}
    if spec.get("type") == "array":          # shell: argv vector
        return {"command": ["bash", "-lc", command]}
    return {"command": command}              # shell_command: a string


# --------------------------------------------------------------------------
# OpenAI Responses API (Codex)
# --------------------------------------------------------------------------

def responses_find_shell_tool(body: dict) -> dict | None:
    by_name = {}
    for tool in body.get("tools") or []:
        if tool.get("type") == "function" and tool.get("name"):
            by_name[tool["name"]] = tool
    return _first_named(by_name, CODEX_SHELL_TOOLS)


def responses_turn_index(body: dict) -> int:
    items = body.get("input")
    if not isinstance(items, list):
        return 0
    n = 0
    for item in items:
        if (isinstance(item, dict)
                and item.get("type") in ("function_call_output", "custom_tool_call_output")
                and str(item.get("call_id", "")).startswith(OPENAI_CALL_PREFIX)):
            n += 1
    return n


def responses_events(body: dict, turn: dict | None, shell_tool: dict | None,
                     resp_id: str, turn_index: int, mcp: tuple[dict, dict] | None = None) -> list[dict]:
    """Return the SSE events (dicts with a "type") for one streamed response."""
    model = body.get("model", "fake-model")
    created = int(time.time())
    base = {
        "id": resp_id, "object": "response", "created_at": created,
        "model": model, "output": [], "parallel_tool_calls": False,
        "tool_choice": "auto", "tools": [],
    }
    events: list[dict] = [
        {"type": "response.created", "response": dict(base, status="in_progress")},
        {"type": "response.in_progress", "response": dict(base, status="in_progress")},
    ]
    outputs: list[dict] = []

    def add_message(text: str) -> None:
        idx = len(outputs)
        item_id = f"msg_fake_{turn_index}_{idx}"
        part = {"type": "output_text", "text": "", "annotations": []}
        events.append({"type": "response.output_item.added", "output_index": idx,
                       "item": {"type": "message", "id": item_id, "status": "in_progress",
                                "role": "assistant", "content": []}})
        events.append({"type": "response.content_part.added", "item_id": item_id,
                       "output_index": idx, "content_index": 0, "part": part})
        for piece in _chunks(text):
            events.append({"type": "response.output_text.delta", "item_id": item_id,
                           "output_index": idx, "content_index": 0, "delta": piece})
        done_part = {"type": "output_text", "text": text, "annotations": []}
        events.append({"type": "response.output_text.done", "item_id": item_id,
                       "output_index": idx, "content_index": 0, "text": text})
        events.append({"type": "response.content_part.done", "item_id": item_id,
                       "output_index": idx, "content_index": 0, "part": done_part})
        item = {"type": "message", "id": item_id, "status": "completed",
                "role": "assistant", "content": [done_part]}
        events.append({"type": "response.output_item.done", "output_index": idx,
                       "item": item})
        outputs.append(item)

    def add_call(name: str, args: dict, namespace: str | None = None) -> None:
        idx = len(outputs)
        item_id = f"fc_fake_{turn_index}_{idx}"
        call_id = f"{OPENAI_CALL_PREFIX}{turn_index}"
        arguments = json.dumps(args)
        named = {"name": name, **({"namespace": namespace} if namespace else {})}
        events.append({"type": "response.output_item.added", "output_index": idx,
                       "item": {"type": "function_call", "id": item_id, "call_id": call_id,
                                **named, "arguments": "", "status": "in_progress"}})
        for piece in _chunks(arguments):
            events.append({"type": "response.function_call_arguments.delta",
                           "item_id": item_id, "output_index": idx, "delta": piece})
        events.append({"type": "response.function_call_arguments.done",
                       "item_id": item_id, "output_index": idx, "arguments": arguments})
        item = {"type": "function_call", "id": item_id, "call_id": call_id,
                **named, "arguments": arguments, "status": "completed"}
        events.append({"type": "response.output_item.done", "output_index": idx,
                       "item": item})
        outputs.append(item)

    if turn is None:                       # auxiliary request
        add_message("OK")
    elif mcp is not None:
        if turn.get("text"):
            add_message(turn["text"])
        add_call(mcp[0]["name"], mcp[1], mcp[0].get("namespace"))
    elif "shell" in turn and shell_tool is not None:
        if turn.get("text"):
            add_message(turn["text"])
        add_call(shell_tool["name"], _shell_args_from_schema(shell_tool, turn["shell"]))
    else:
        add_message(turn.get("text") or f"(no shell tool offered for: {turn.get('shell')})")

    in_tok = _approx_tokens(body.get("input", ""))
    out_tok = _approx_tokens(outputs)
    usage = {"input_tokens": in_tok, "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": out_tok, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": in_tok + out_tok}
    events.append({"type": "response.completed",
                   "response": dict(base, status="completed", output=outputs, usage=usage)})
    for i, ev in enumerate(events):
        ev["sequence_number"] = i
    return events


# --------------------------------------------------------------------------
# Anthropic Messages API (Claude Code)
# --------------------------------------------------------------------------

def messages_find_shell_tool(body: dict) -> dict | None:
    for tool in body.get("tools") or []:
        if tool.get("name") == CLAUDE_SHELL_TOOL:
            return tool
    return None


def messages_turn_index(body: dict) -> int:
    n = 0
    for msg in body.get("messages") or []:
        content = msg.get("content")
        if msg.get("role") != "user" or not isinstance(content, list):
            continue
        for block in content:
            if (isinstance(block, dict) and block.get("type") == "tool_result"
                    and str(block.get("tool_use_id", "")).startswith(ANTHROPIC_CALL_PREFIX)):
                n += 1
    return n


def messages_content(turn: dict | None, shell_tool: dict | None,
                     turn_index: int, mcp: tuple[dict, dict] | None = None) -> tuple[list[dict], str]:
    """Return (content blocks, stop_reason) for one assistant message."""
    if turn is None:
        return [{"type": "text", "text": "OK"}], "end_turn"
    if mcp is not None:
        blocks = [{"type": "text", "text": turn["text"]}] if turn.get("text") else []
        blocks.append({"type": "tool_use", "id": f"{ANTHROPIC_CALL_PREFIX}{turn_index}", "name": mcp[0]["name"], "input": mcp[1]})
        return blocks, "tool_use"
    if "shell" in turn and shell_tool is not None:
        blocks = []
        if turn.get("text"):
            blocks.append({"type": "text", "text": turn["text"]})
        tool_input = {"command": turn["shell"]}
        props = (shell_tool.get("input_schema") or {}).get("properties") or {}
        if "description" in props:
            tool_input["description"] = turn.get("description") or "Run scripted command"
        blocks.append({"type": "tool_use", "id": f"{ANTHROPIC_CALL_PREFIX}{turn_index}",
                       "name": shell_tool["name"], "input": tool_input})
        return blocks, "tool_use"
    text = turn.get("text") or f"(no Bash tool offered for: {turn.get('shell')})"
    return [{"type": "text", "text": text}], "end_turn"


def messages_events(message: dict) -> list[dict]:
    """Turn a complete assistant message into Messages-API SSE events."""
    start = dict(message, content=[], stop_reason=None, stop_sequence=None,
                 usage=dict(message["usage"], output_tokens=1))
    events: list[dict] = [{"type": "message_start", "message": start}, {"type": "ping"}]
    for idx, block in enumerate(message["content"]):
        if block["type"] == "text":
            events.append({"type": "content_block_start", "index": idx,
                           "content_block": {"type": "text", "text": ""}})
            for piece in _chunks(block["text"]):
                events.append({"type": "content_block_delta", "index": idx,
                               "delta": {"type": "text_delta", "text": piece}})
        else:  # tool_use
            events.append({"type": "content_block_start", "index": idx,
                           "content_block": {"type": "tool_use", "id": block["id"],
                                             "name": block["name"], "input": {}}})
            for piece in _chunks(json.dumps(block["input"])):
                events.append({"type": "content_block_delta", "index": idx,
                               "delta": {"type": "input_json_delta", "partial_json": piece}})
        events.append({"type": "content_block_stop", "index": idx})
    events.append({"type": "message_delta",
                   "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                   "usage": {"output_tokens": message["usage"]["output_tokens"]}})
    events.append({"type": "message_stop"})
    return events


# --------------------------------------------------------------------------
# Gemini API (Gemini CLI)
# --------------------------------------------------------------------------

def _command_args(schema: dict, turn: dict) -> dict:
    if (((schema or {}).get("properties") or {}).get("commands") or {}).get("type") == "array":  # Cline: a list of commands
        return {"commands": [turn["shell"]]}
    args = {"command": turn["shell"]}
    if "description" in ((schema or {}).get("properties") or {}):
        args["description"] = turn.get("description") or "Run scripted command"
    return args


def gemini_find_shell_tool(body: dict) -> dict | None:
    declared = {}
    for tool in body.get("tools") or []:
        for function in (tool.get("functionDeclarations") or []) if isinstance(tool, dict) else []:
            declared[function.get("name")] = function
    return _first_named(declared, GEMINI_SHELL_TOOLS)


def gemini_turn_index(body: dict) -> int:
    """The function responses to calls this server issued (by id; by the shell tool's name when ids are dropped)."""
    n = 0
    for content in body.get("contents") or []:
        for part in content.get("parts") or [] if isinstance(content, dict) else []:
            response = part.get("functionResponse") if isinstance(part, dict) else None
            if not isinstance(response, dict):
                continue
            call_id = str(response.get("id") or "")
            name = str(response.get("name"))
            named = name in GEMINI_SHELL_TOOLS or any(is_mcp_tool(name, tool) for tool in MCP_TOOLS)
            if call_id.startswith(GEMINI_CALL_PREFIX) or (not call_id and named):
                n += 1
    return n


def gemini_parts(turn: dict | None, shell_tool: dict | None, turn_index: int, json_mode: bool,
                 mcp: tuple[dict, dict] | None = None) -> list[dict]:
    if turn is None:  # auxiliary: a JSON answer where the request asks for JSON
        return [{"text": "{}" if json_mode else "OK"}]
    if mcp is not None:
        parts = [{"text": turn["text"]}] if turn.get("text") else []
        return parts + [{"functionCall": {"id": f"{GEMINI_CALL_PREFIX}{turn_index}", "name": mcp[0]["name"], "args": mcp[1]}}]
    if "shell" in turn and shell_tool is not None:
        parts = [{"text": turn["text"]}] if turn.get("text") else []
        schema = shell_tool.get("parametersJsonSchema") or shell_tool.get("parameters") or {}
        parts.append({"functionCall": {"id": f"{GEMINI_CALL_PREFIX}{turn_index}", "name": shell_tool["name"],
                                       "args": _command_args(schema, turn)}})
        return parts
    return [{"text": turn.get("text") or f"(no shell tool offered for: {turn.get('shell')})"}]


def gemini_chunks(body: dict, parts: list[dict], model: str) -> list[dict]:
    """The streamed chunks of one answer: text in pieces, each function call whole, the finish reason and usage last."""
    prompt = _approx_tokens(body.get("contents", ""))
    answer = _approx_tokens(parts)
    pieces = [{"text": piece} for part in parts if "text" in part for piece in _chunks(part["text"])]
    pieces += [part for part in parts if "functionCall" in part]
    chunks = [{"candidates": [{"content": {"role": "model", "parts": [piece]}, "index": 0}], "modelVersion": model}
              for piece in pieces]
    chunks[-1]["candidates"][0]["finishReason"] = "STOP"
    chunks[-1]["usageMetadata"] = {"promptTokenCount": prompt, "candidatesTokenCount": answer,
                                   "totalTokenCount": prompt + answer}
    return chunks


# --------------------------------------------------------------------------
# OpenAI Chat Completions (Qwen Code)
# --------------------------------------------------------------------------

def chat_find_shell_tool(body: dict) -> dict | None:
    declared = {}
    for tool in body.get("tools") or []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict):
            declared[function.get("name")] = function
    return _first_named(declared, CHAT_SHELL_TOOLS)


def chat_turn_index(body: dict) -> int:
    return sum(1 for message in body.get("messages") or []
               if isinstance(message, dict) and message.get("role") == "tool"
               and str(message.get("tool_call_id", "")).startswith(OPENAI_CALL_PREFIX))


def chat_chunks(body: dict, turn: dict | None, shell_tool: dict | None, completion_id: str, turn_index: int,
                mcp: tuple[dict, dict] | None = None) -> list[dict]:
    """The chat.completion.chunk events of one answer; the last carries the usage (choices empty)."""
    base = {"id": completion_id, "object": "chat.completion.chunk", "created": int(time.time()),
            "model": body.get("model", "fake-model")}

    def chunk(delta: dict, finish: str | None = None) -> dict:
        return dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": finish}])

    chunks = [chunk({"role": "assistant", "content": ""})]
    if turn is None:
        text, call = "OK", None
    elif mcp is not None:
        text, call = turn.get("text") or "", mcp[0]
    elif "shell" in turn and shell_tool is not None:
        text, call = turn.get("text") or "", shell_tool
    else:
        text, call = turn.get("text") or f"(no shell tool offered for: {turn.get('shell')})", None
    chunks += [chunk({"content": piece}) for piece in (_chunks(text) if text else [])]
    if call is not None:
        arguments = json.dumps(mcp[1] if mcp is not None else _command_args(call.get("parameters") or {}, turn))
        chunks.append(chunk({"tool_calls": [{"index": 0, "id": f"{OPENAI_CALL_PREFIX}{turn_index}", "type": "function",
                                             "function": {"name": call["name"], "arguments": ""}}]}))
        chunks += [chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}) for piece in _chunks(arguments)]
    chunks.append(chunk({}, "tool_calls" if call is not None else "stop"))
    prompt, answer = _approx_tokens(body.get("messages", "")), _approx_tokens(chunks)
    chunks.append(dict(base, choices=[], usage={"prompt_tokens": prompt, "completion_tokens": answer,
                                                "total_tokens": prompt + answer}))
    return chunks


# Aider offers no tools: its model proposes shell commands in ```bash blocks of its answer, which Aider runs when its
# user agrees. Its requests are told apart from side calls by its system prompt (its edit format's SEARCH/REPLACE
# blocks); each answer carries TEXT_TURN_MARK, and the number of answers with the mark is the turn to play.
TEXT_CLIENT_MARK = "SEARCH/REPLACE"
TEXT_TURN_MARK = "[scripted turn]"


def text_client(body: dict) -> bool:
    """True for a request of a client that takes shell commands from the answer's text (Aider)."""
    return any(isinstance(message, dict) and message.get("role") == "system"
               and TEXT_CLIENT_MARK in str(message.get("content")) for message in body.get("messages") or [])


def text_turn_index(body: dict) -> int:
    return sum(1 for message in body.get("messages") or []
               if isinstance(message, dict) and message.get("role") == "assistant"
               and TEXT_TURN_MARK in str(message.get("content")))


def text_answer(turn: dict) -> str:
    """The answer of one turn for a text client: the mark, the turn's text, its shell command in a ```bash block."""
    answer = f"{TEXT_TURN_MARK} {turn.get('text') or ''}".rstrip()
    if "shell" in turn:
        answer += f"\n\n```bash\n{turn['shell']}\n```\n"
    return answer


def chat_completion(chunks: list[dict]) -> dict:
    """The non-streamed chat.completion that the chunks add up to."""
    content, calls, finish = "", {}, "stop"
    for item in chunks:
        for choice in item["choices"]:
            delta = choice["delta"]
            content += delta.get("content") or ""
            for call in delta.get("tool_calls") or []:
                whole = calls.setdefault(call["index"], {"id": call.get("id"), "type": "function",
                                                         "function": {"name": "", "arguments": ""}})
                whole["function"]["name"] += call.get("function", {}).get("name") or ""
                whole["function"]["arguments"] += call.get("function", {}).get("arguments") or ""
            finish = choice["finish_reason"] or finish
    message = {"role": "assistant", "content": content or None}
    if calls:
        message["tool_calls"] = [calls[index] for index in sorted(calls)]
    last = chunks[-1]
    return {"id": last["id"], "object": "chat.completion", "created": last["created"], "model": last["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": last["usage"]}


# --------------------------------------------------------------------------
# HTTP server
# --------------------------------------------------------------------------

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-provider/1.0"

    # Set on the server instance.
    @property
    def script(self) -> Script:
        return self.server.script  # type: ignore[attr-defined]

    @property
    def log(self) -> JsonlLog:
        return self.server.log  # type: ignore[attr-defined]

    def log_message(self, fmt, *args):  # quieter than the default
        if self.server.verbose:  # type: ignore[attr-defined]
            sys.stderr.write("fake-provider: " + (fmt % args) + "\n")

    # -- request reading ----------------------------------------------------

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                data += self.rfile.read(size)
                self.rfile.readline()
        else:
            data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        enc = self.headers.get("Content-Encoding", "").lower()
        if enc == "gzip":
            data = gzip.decompress(data)
        elif enc == "deflate":
            data = zlib.decompress(data)
        return data

    def _begin(self) -> tuple[int, dict | None, bytes]:
        seq = self.log.next_seq()
        raw = self._read_body() if self.command in ("POST", "PUT", "PATCH") else b""
        body = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
        self._seq = seq
        self._req_record = {
            "seq": seq, "ts": time.time(), "dir": "request", "method": self.command,
            "path": self.path, "headers": dict(self.headers.items()),
            "body": body if body is not None else (raw.decode("utf-8", "replace") if raw else None),
        }
        self.log.write(self._req_record)
        return seq, body, raw

    # -- response writing ---------------------------------------------------

    def _send_json(self, status: int, obj, note: str = "") -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", f"req_fake_{self._seq}")
        self.send_header("x-request-id", f"req_fake_{self._seq}")
        self.end_headers()
        self.wfile.write(data)
        self.log.write({"seq": self._seq, "ts": time.time(), "dir": "response",
                        "status": status, "note": note, "body": obj})

    def _send_sse(self, events: list[dict], named: bool = True, note: str = "", done: bool = False) -> None:
        """Stream events as SSE (with `event: TYPE` lines when named; a final `data: [DONE]` when done)."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("request-id", f"req_fake_{self._seq}")
        self.send_header("x-request-id", f"req_fake_{self._seq}")
        self.end_headers()
        for ev in events:
            chunk = ""
            if named:
                chunk += f"event: {ev['type']}\n"
            chunk += f"data: {json.dumps(ev)}\n\n"
            data = chunk.encode()
            self.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()
        if done:
            self.wfile.write(b"E\r\ndata: [DONE]\n\n\r\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        self.log.write({"seq": self._seq, "ts": time.time(), "dir": "response",
                        "status": 200, "note": note, "sse": events})

    # -- routing ------------------------------------------------------------

    def do_HEAD(self):
        self._begin()
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()
        self.log.write({"seq": self._seq, "ts": time.time(), "dir": "response", "status": 200})

    def do_GET(self):
        self._begin()
        path = urlsplit(self.path).path.rstrip("/")
        if self.headers.get("Upgrade", "").lower() == "websocket":
            # Codex's built-in "openai" provider tries a Responses WebSocket
            # first; refusing the upgrade makes it fall back to HTTP+SSE.
            self._send_json(426, {"error": {"type": "invalid_request_error",
                                            "message": "websockets not supported"}},
                            "websocket refused")
        elif path.endswith("/models"):
            # Both OpenAI-style ({"object":"list","data":[...]}) and Codex's own
            # model-catalog shape ({"models":[...]}) are accepted as empty lists.
            self._send_json(200, {"object": "list", "data": [], "models": []}, "models")
        else:
            self._send_json(200, {}, "unknown GET")

    def do_POST(self):
        _, body, _ = self._begin()
        path = urlsplit(self.path).path.rstrip("/")
        if not isinstance(body, dict):
            self._send_json(400, {"error": {"type": "invalid_request_error",
                                            "message": "body is not a JSON object"}})
            return
        if path.endswith("/chat/completions"):
            self._chat(body)
        elif ":" in path.rsplit("/", 1)[-1]:  # Gemini: /v1beta/models/MODEL:METHOD
            self._gemini(path.rsplit("/", 1)[-1], body)
        elif path.endswith("/responses"):
            self._responses(body)
        elif path.endswith("/messages/count_tokens"):
            self._send_json(200, {"input_tokens": _approx_tokens(body)}, "count_tokens")
        elif path.endswith("/messages"):
            self._messages(body)
        else:
            self._send_json(404, {"error": {"type": "not_found_error",
                                            "message": f"no route {self.path}"}})

    def _play(self, tool: dict | None, turn_index: Callable[[dict], int], body: dict) -> tuple[dict | None, int, str]:
        """The script turn a request plays, its index and its log note; without the shell tool it is auxiliary (None, -1)."""
        if tool is None:
            return None, -1, "aux"
        index = turn_index(body)
        turn = self.script.turn(index)
        offered = mcp_call(turn, body)
        qualified = offered and (f"{offered[0]['namespace']}.{offered[0]['name']}" if offered[0].get("namespace") else offered[0]["name"])
        return turn, index, f"turn {index}" + (f" mcp {qualified}" if offered else "")

    def _responses(self, body: dict) -> None:
        tool = responses_find_shell_tool(body)
        turn, index, note = self._play(tool, responses_turn_index, body)
        resp_id = f"resp_fake_{self._seq}"
        mcp = mcp_call(turn, body)
        events = responses_events(body, turn, tool, resp_id, max(index, 0), mcp)
        if body.get("stream", False):
            self._send_sse(events, named=True, note=note)
        else:
            self._send_json(200, events[-1]["response"], note)

    def _gemini(self, target: str, body: dict) -> None:
        model, _, method = target.partition(":")
        if method == "countTokens":
            self._send_json(200, {"totalTokens": _approx_tokens(body)}, "countTokens")
            return
        if method not in ("generateContent", "streamGenerateContent"):
            self._send_json(404, {"error": {"code": 404, "status": "NOT_FOUND", "message": f"no method {method}"}})
            return
        tool = gemini_find_shell_tool(body)
        turn, index, note = self._play(tool, gemini_turn_index, body)
        config = body.get("generationConfig") or {}
        json_mode = config.get("responseMimeType") == "application/json"
        chunks = gemini_chunks(body, gemini_parts(turn, tool, max(index, 0), json_mode, mcp_call(turn, body)), model)
        if method == "streamGenerateContent":
            self._send_sse(chunks, named=False, note=note)
            return
        whole = dict(chunks[-1])
        parts = [part for item in chunks for part in item["candidates"][0]["content"]["parts"]]
        text = "".join(part.get("text", "") for part in parts if "text" in part)
        merged = ([{"text": text}] if text else []) + [part for part in parts if "functionCall" in part]
        whole["candidates"] = [dict(chunks[-1]["candidates"][0], content={"role": "model", "parts": merged})]
        self._send_json(200, whole, note)

    def _chat(self, body: dict) -> None:
        tool = chat_find_shell_tool(body)
        if tool is None and text_client(body):
            index = text_turn_index(body)
            turn, note = {"text": text_answer(self.script.turn(index))}, f"text turn {index}"
        else:
            turn, index, note = self._play(tool, chat_turn_index, body)
        chunks = chat_chunks(body, turn, tool, f"chatcmpl_fake_{self._seq}", max(index, 0), mcp_call(turn, body))
        if body.get("stream", False):
            self._send_sse(chunks, named=False, note=note, done=True)
        else:
            self._send_json(200, chat_completion(chunks), note)

    def _messages(self, body: dict) -> None:
        tool = messages_find_shell_tool(body)
        turn, index, note = self._play(tool, messages_turn_index, body)
        content, stop = messages_content(turn, tool, max(index, 0), mcp_call(turn, body))
        message = {
            "id": f"msg_fake_{self._seq}", "type": "message", "role": "assistant",
            "model": body.get("model", "fake-model"), "content": content,
            "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": _approx_tokens(body.get("messages", "")),
                      "output_tokens": _approx_tokens(content),
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
        }
        if body.get("stream", False):
            self._send_sse(messages_events(message), named=True, note=note)
        else:
            self._send_json(200, message, note)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, port: int, script: Script, log: JsonlLog, verbose: bool = False):
        super().__init__(("127.0.0.1", port), Handler)
        self.script = script
        self.log = log
        self.verbose = verbose


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--script", required=True, help="JSON script of turns")
    ap.add_argument("--log", help="JSONL file to append requests/responses to")
    ap.add_argument("--port", type=int, default=0, help="0 = pick a free port")
    ap.add_argument("--port-file", help="write the bound port here")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args(argv)

    server = Server(args.port, Script.load(args.script), JsonlLog(args.log), args.verbose)
    port = server.server_address[1]
    if args.port_file:
        with open(args.port_file + ".tmp", "w") as f:
            f.write(f"{port}\n")
        import os
        os.replace(args.port_file + ".tmp", args.port_file)
    print(f"listening on 127.0.0.1:{port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
