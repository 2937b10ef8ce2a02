"""The model relay of a Run: its policy from the spec and the Host's environment, per agent kind."""

from __future__ import annotations

import os
from typing import Mapping

from orchestrator.relay.server import RelayPolicy
from orchestrator.run.spec import RunSpec

# upstream, credential variable, credential header, allowed paths
DEFAULTS: dict[str, tuple[str, str, str, tuple[str, ...]]] = {
    "codex": ("https://api.openai.com", "OPENAI_API_KEY", "authorization", ("/v1/responses",)),
    "claude-code": ("https://api.anthropic.com", "ANTHROPIC_API_KEY", "x-api-key", ("/v1/messages",)),
    "gemini": ("https://generativelanguage.googleapis.com", "GEMINI_API_KEY", "x-goog-api-key", ("/v1beta/models",)),
    "qwen-code": ("https://dashscope-intl.aliyuncs.com/compatible-mode", "DASHSCOPE_API_KEY", "authorization", ("/v1/chat/completions",)),
}
AGENT_IMAGES = {"codex": "agent-codex", "claude-code": "agent-claude-code"}
AGENT_IMAGES["gemini"] = "agent-gemini"
AGENT_IMAGES["qwen-code"] = "agent-qwen-code"


class RelayConfigError(Exception):
    """The relay cannot be set up (for example, the credential variable is not set on the Host)."""


def relay_policy(spec: RunSpec, environ: Mapping[str, str] = os.environ) -> RelayPolicy | None:
    """Return the relay policy of a Run whose agent needs a model provider, else None. Raises RelayConfigError."""
    kind = spec.agent.kind
    if kind not in DEFAULTS:
        return None
    upstream, variable, header, paths = DEFAULTS[kind]
    relay = spec.relay
    variable = relay.credential_env or variable
    credential = environ.get(variable, "")
    if not credential:
        raise RelayConfigError(f"the {kind} agent needs a provider credential: set {variable} in the Host's environment")
    return RelayPolicy(
        upstream=(relay.upstream or upstream).rstrip("/"),
        allow_paths=tuple(relay.allow_paths or paths),
        credential=credential,
        credential_header=header,
        max_requests=relay.max_requests,
        max_tokens=relay.max_tokens,
    )
