"""Runs a coding-agent CLI (Codex CLI, Claude Code, Gemini CLI, Qwen Code, opencode, Aider, mini-SWE-agent or Cline)
unattended inside the agent container.

The container has no network: the CLI talks HTTP to a loopback bridge that
pipes to the Host's model relay, which adds the real credential. The CLI's
own sandbox and approvals are off (the container is the boundary), and its
JSON events go to stdout, which the Host keeps in the run directory.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from orchestrator.hostclient.relay_bridge import serve as serve_bridge

PROMPT = (
    "Read TASK.md in the current directory and do the task it describes. "
    "Use the `epg-session` command to check your budget, to submit program/ for evaluation, "
    "and to read where each Feedback is published. Before you stop, hand back your best "
    "Submissions with `epg-session finish ID [ID...]`."
)
# The prompt of a CLI that has the Host API's MCP server (MCP_SERVER) configured.
MCP_PROMPT = (
    "Read TASK.md in the current directory and do the task it describes. "
    "Use the tools of the `epg` MCP server: `status` for your budget, `submit` to evaluate program/ "
    "(with `episodes`, an index selector such as \"0:4\"), `feedback` to read a Submission's Feedback, "
    "and, before you stop, `finish` with the ids of your best Submissions. "
    "The `epg-session` shell command does the same."
)
MCP_SERVER = "epg"  # the server's name in each CLI's configuration: its tools reach the model as e.g. mcp__epg__submit
MCP_COMMAND = "epg-session-mcp"  # orchestrator.hostclient.mcp_server, installed in agent-base
MCP_TOOL_TIMEOUT_S = 3600  # a submit lasts as long as its Episodes; the Run's own wall clock bounds the phase
# The kinds whose CLI gets the MCP server (and MCP_PROMPT); a kind not listed keeps PROMPT and the shell command alone.
MCP_KINDS = ("codex", "claude-code", "gemini", "qwen-code", "opencode", "cline")
MCP_TOOLS = ("status", "submit", "feedback", "finish")
# The relay replaces whatever credential the CLI sends; the CLI only needs a non-empty one.
PLACEHOLDER_KEY = "provided-by-the-host-relay"
CLAUDE_EFFORT_TOKENS = {"low": "4000", "medium": "16000", "high": "32000"}
# Where each CLI looks for the user's agent skills (<dir>/<name>/SKILL.md), below its home directory.
SKILL_DIRS = {
    "codex": (".codex/skills", ".agents/skills"),  # $CODEX_HOME/skills, and the user-level .agents/skills
    "claude-code": (".claude/skills",),
    "gemini": (".gemini/skills",),
    "qwen-code": (".qwen/skills",),
    "opencode": (".config/opencode/skills",),
    "aider": (),  # Aider and mini-SWE-agent read no skills: the task text lists them
    "mini-swe-agent": (),
    "cline": (".cline/skills",),
}
CLIS = ("codex", "claude-code", "gemini", "qwen-code", "opencode", "aider", "mini-swe-agent", "cline")


def link_skills(cli: str, home: Path, mounted: Path | None) -> list[Path]:
    """Link each skill mounted read-only below mounted (EPG_SKILLS) into the directories where cli looks for skills.

    The links live in the agent's home (a tmpfs); what they lead to stays read-only. Return the links made.
    """
    if mounted is None or not mounted.is_dir():
        return []
    links = []
    for relative in SKILL_DIRS[cli]:
        directory = home / relative
        directory.mkdir(parents=True, exist_ok=True)
        for skill in sorted(mounted.iterdir()):
            link = directory / skill.name
            if not link.exists() and not link.is_symlink():
                link.symlink_to(skill, target_is_directory=True)
                links.append(link)
    return links


def mcp_environment() -> dict[str, str]:
    """What the MCP server needs of the agent container's environment, given to it explicitly: a CLI may start its
    MCP servers with a reduced environment (Codex passes a short allow-list; Gemini CLI drops names like *TOKEN*)."""
    return {name: os.environ[name] for name in ("EPG_HOST_API", "EPG_SESSION_TOKEN") if name in os.environ}


def mcp_stdio_server(workspace: Path) -> dict[str, Any]:
    """The MCP server's stdio launch as the JSON configurations of Claude Code, Gemini CLI, Qwen Code and Cline spell it."""
    return {"command": MCP_COMMAND, "args": ["--workspace", str(workspace)], "env": mcp_environment()}


def _toml_string(text: str) -> str:
    return json.dumps(text)  # a JSON string is a TOML basic string for the text written here


def codex_mcp_table(workspace: Path) -> str:
    """config.toml's `[mcp_servers.epg]` table: the server, its environment, a tool timeout as long as a submit, and
    `required`, so that Codex starts the turn once the server is up (else its first requests offer no MCP tool)."""
    server = mcp_stdio_server(workspace)
    args = ", ".join(_toml_string(arg) for arg in server["args"])
    env = ", ".join(f"{name} = {_toml_string(value)}" for name, value in server["env"].items())
    return f"""
[mcp_servers.{MCP_SERVER}]
command = {_toml_string(server["command"])}
args = [{args}]
env = {{ {env} }}
required = true
startup_timeout_sec = 60
tool_timeout_sec = {MCP_TOOL_TIMEOUT_S}
"""


def claude_mcp_config(workspace: Path, home: Path) -> Path:
    """The --mcp-config file of Claude Code (in the agent's home): the server as a stdio server."""
    path = home / ".epg-mcp.json"
    path.write_text(json.dumps({"mcpServers": {MCP_SERVER: {"type": "stdio", **mcp_stdio_server(workspace)}}}, indent=2))
    return path


def gemini_mcp_settings(workspace: Path) -> dict[str, Any]:
    """settings.json's `mcpServers` of Gemini CLI and Qwen Code: the server, trusted (no confirmation), with a tool
    timeout (milliseconds) as long as a submit."""
    return {"mcpServers": {MCP_SERVER: {**mcp_stdio_server(workspace), "trust": True, "timeout": MCP_TOOL_TIMEOUT_S * 1000}}}


def codex_command(model: str, effort: str, port: int, home: Path, mcp_workspace: Path | None = None) -> tuple[list[str], dict[str, str]]:
    """Codex exec with its JSON events; with mcp_workspace, the MCP server in config.toml and MCP_PROMPT."""
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(f"""\
model = "{model}"
model_provider = "epg_relay"
model_reasoning_effort = "{effort}"
check_for_update_on_startup = false

[model_providers.epg_relay]
name = "EvoPolicyGym relay"
base_url = "http://127.0.0.1:{port}/v1"
env_key = "OPENAI_API_KEY"
wire_api = "responses"
supports_websockets = false

[analytics]
enabled = false

[features]
plugins = false
remote_plugin = false
enable_request_compression = false
""" + (codex_mcp_table(mcp_workspace) if mcp_workspace else ""))
    argv = ["codex", "exec", "--json", "--dangerously-bypass-approvals-and-sandbox", "--skip-git-repo-check",
            "-m", model, "-c", f"model_reasoning_effort={effort}", MCP_PROMPT if mcp_workspace else PROMPT]
    return argv, {"CODEX_HOME": str(codex_home), "OPENAI_API_KEY": PLACEHOLDER_KEY}


def claude_command(model: str, effort: str | None, port: int, home: Path | None = None,
                   mcp_workspace: Path | None = None) -> tuple[list[str], dict[str, str]]:
    """Claude Code headless with its JSON stream, every tool allowed; with mcp_workspace, the MCP server (--mcp-config
    in home, no other MCP configuration read) and MCP_PROMPT."""
    environment = {
        "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}",
        "ANTHROPIC_API_KEY": PLACEHOLDER_KEY,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "IS_SANDBOX": "1",
    }
    if effort:
        environment["MAX_THINKING_TOKENS"] = CLAUDE_EFFORT_TOKENS[effort]
    argv = ["claude", "-p", MCP_PROMPT if mcp_workspace else PROMPT, "--output-format", "stream-json", "--verbose",
            "--dangerously-skip-permissions", "--model", model]
    if mcp_workspace is not None:
        config = claude_mcp_config(mcp_workspace, home or Path(os.environ.get("HOME", "/tmp")))
        argv += ["--mcp-config", str(config), "--strict-mcp-config"]
        environment["MCP_TOOL_TIMEOUT"] = str(MCP_TOOL_TIMEOUT_S * 1000)
        # Otherwise Claude Code offers MCP tools only through its ToolSearch tool, deferred: the four are offered as they are.
        environment["ENABLE_TOOL_SEARCH"] = "false"
    return argv, environment


# Gemini CLI and Qwen Code (a fork of it) share the settings that keep them off the network: no usage statistics,
# no telemetry, no update check, no IDE companion, no folder-trust prompt.
_QUIET_SETTINGS = {
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False, "disableAutoUpdate": True,
                "disableUpdateNag": True},
    "ide": {"enabled": False},
}


def _write_settings(directory: Path, settings: dict[str, Any]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "settings.json").write_text(json.dumps(settings, indent=2))


def gemini_command(model: str, port: int, home: Path, mcp_workspace: Path | None = None) -> tuple[list[str], dict[str, str]]:
    """Gemini CLI headless (-p) with its JSON event stream, every tool approved, the API key against the bridge; with
    mcp_workspace, the MCP server in settings.json and MCP_PROMPT."""
    _write_settings(home / ".gemini", {
        **_QUIET_SETTINGS,
        "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
        **(gemini_mcp_settings(mcp_workspace) if mcp_workspace else {}),
    })
    environment = {
        "GOOGLE_GEMINI_BASE_URL": f"http://127.0.0.1:{port}",
        "GEMINI_API_KEY": PLACEHOLDER_KEY,
        "GEMINI_SANDBOX": "false",
    }
    argv = ["gemini", "-p", MCP_PROMPT if mcp_workspace else PROMPT, "--output-format", "stream-json", "--approval-mode", "yolo", "--skip-trust", "-m", model]
    return argv, environment


def qwen_command(model: str, port: int, home: Path, mcp_workspace: Path | None = None) -> tuple[list[str], dict[str, str]]:
    """Qwen Code headless with its JSON event stream, every tool approved, an OpenAI-compatible provider at the bridge;
    with mcp_workspace, the MCP server in settings.json and MCP_PROMPT."""
    _write_settings(home / ".qwen", {
        **_QUIET_SETTINGS,
        "security": {"auth": {"selectedType": "openai"}, "folderTrust": {"enabled": False}},
        "model": {"name": model},
        **(gemini_mcp_settings(mcp_workspace) if mcp_workspace else {}),
        # Qwen Code offers MCP tools only through its tool_search bridge, deferred, unless they are named visible.
        **({"tools": {"visible": [f"mcp__{MCP_SERVER}__{tool}" for tool in MCP_TOOLS]}} if mcp_workspace else {}),
    })
    environment = {
        "OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1",
        "OPENAI_API_KEY": PLACEHOLDER_KEY,
        "OPENAI_MODEL": model,
        "QWEN_CODE_SUPPRESS_YOLO_WARNING": "1",  # the container is the sandbox
    }
    argv = ["qwen", "--output-format", "stream-json", "--approval-mode", "yolo", "--auth-type", "openai", "-m", model, MCP_PROMPT if mcp_workspace else PROMPT]
    return argv, environment


def opencode_mcp_config(workspace: Path) -> dict[str, Any]:
    """opencode.json's `mcp` section: the server as a local (stdio) server, its command one list, its environment, and
    a request timeout (milliseconds) as long as a submit; opencode offers its tools as epg_status, epg_submit, ..."""
    server = mcp_stdio_server(workspace)
    return {"mcp": {MCP_SERVER: {"type": "local", "command": [server["command"], *server["args"]],
                                 "environment": server["env"], "enabled": True, "timeout": MCP_TOOL_TIMEOUT_S * 1000}}}


def opencode_command(model: str, port: int, home: Path, mcp_workspace: Path | None = None) -> tuple[list[str], dict[str, str]]:
    """opencode's `run` with its JSON event stream, on an OpenAI-compatible provider at the bridge, every tool allowed
    but web fetches, and its update check, model catalogue download, default plugins, LSP downloads and sharing off;
    with mcp_workspace, the MCP server in opencode.json (its tools allowed) and MCP_PROMPT."""
    directory = home / ".config" / "opencode"
    directory.mkdir(parents=True, exist_ok=True)
    config = {
        "provider": {"epg": {"npm": "@ai-sdk/openai-compatible", "name": "EvoPolicyGym relay",
                             "options": {"baseURL": f"http://127.0.0.1:{port}/v1", "apiKey": PLACEHOLDER_KEY},
                             "models": {model: {"name": model}}}},
        "model": f"epg/{model}",
        "small_model": f"epg/{model}",
        "autoupdate": False,
        "share": "disabled",
        "permission": {"edit": "allow", "bash": "allow", "webfetch": "deny",
                       **({f"{MCP_SERVER}_*": "allow"} if mcp_workspace else {})},
        **(opencode_mcp_config(mcp_workspace) if mcp_workspace else {}),
    }
    (directory / "opencode.json").write_text(json.dumps(config, indent=2))
    environment = {
        "OPENCODE_CONFIG": str(directory / "opencode.json"),
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
        "OPENCODE_DISABLE_SHARE": "1",
    }
    return ["opencode", "run", "--format", "json", "-m", f"epg/{model}", MCP_PROMPT if mcp_workspace else PROMPT], environment


# What the Python CLIs (Aider, mini-SWE-agent) share: LiteLLM's OpenAI provider at the bridge, its price table read
# from the package (not fetched).
def _litellm_environment(port: int) -> dict[str, str]:
    return {
        "OPENAI_API_BASE": f"http://127.0.0.1:{port}/v1",
        "OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1",
        "OPENAI_API_KEY": PLACEHOLDER_KEY,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }


# Aider is a pair programmer: after each answer it waits for its user. Its driver is that user: it gives the task,
# then answers every question (run this command? add its output?) and every request for the next message with "yes",
# up to AIDER_TURNS lines; then end of input ends Aider.
AIDER_TURNS = 200


def aider_command(model: str, port: int, home: Path) -> tuple[list[str], dict[str, str], str]:
    """Aider in its plain terminal mode (no git, no repository map, no update check, no analytics), its histories kept
    out of the workspace; returns argv, environment and the text its standard input gets."""
    state = home / ".aider"
    state.mkdir(parents=True, exist_ok=True)
    argv = ["aider", "--model", f"openai/{model}", "--edit-format", "diff", "--no-git", "--no-auto-commits",
            "--no-check-update", "--analytics-disable", "--no-show-model-warnings", "--no-show-release-notes",
            "--no-pretty", "--no-fancy-input", "--no-stream", "--map-tokens", "0", "--no-detect-urls", "--no-auto-lint",
            "--chat-history-file", str(state / "chat.md"), "--input-history-file", str(state / "input.txt")]
    return argv, _litellm_environment(port), PROMPT + "\n" + "yes\n" * AIDER_TURNS


def mini_swe_agent_command(model: str, port: int, home: Path) -> tuple[list[str], dict[str, str]]:
    """mini-SWE-agent's `mini` with its bash tool, no confirmation (yolo), no cost limit (the relay counts), ending
    when the agent says it is done; its trajectory stays in the agent's home. Its default configuration, but with a
    command's time limit as long as a submit's (mini kills a command after 30 s by default, an `epg-session submit`
    of more than a few Episodes with it)."""
    state = home / ".mini-swe-agent"
    state.mkdir(parents=True, exist_ok=True)
    environment = {
        **_litellm_environment(port),
        "MSWEA_CONFIGURED": "true",
        "MSWEA_SILENT_STARTUP": "1",
        "MSWEA_GLOBAL_CONFIG_DIR": str(state),
        "MSWEA_COST_TRACKING": "ignore_errors",
    }
    argv = ["mini", "--yolo", "--exit-immediately", "--cost-limit", "0", "--model", f"openai/{model}",
            "-c", "mini.yaml", "-c", f"environment.timeout={MCP_TOOL_TIMEOUT_S}",
            "--output", str(state / "trajectory.json"), "--task", PROMPT]
    return argv, environment


def cline_mcp_settings(workspace: Path) -> dict[str, Any]:
    """cline_mcp_settings.json: the server as a stdio server, enabled, with a request timeout (seconds; Cline caps it
    at an hour) as long as a submit. Cline offers its tools as epg__status, epg__submit, ...; --auto-approve covers them."""
    return {"mcpServers": {MCP_SERVER: {"type": "stdio", **mcp_stdio_server(workspace), "disabled": False,
                                        "timeout": MCP_TOOL_TIMEOUT_S}}}


def cline_command(model: str, port: int, home: Path, mcp_workspace: Path | None = None) -> tuple[list[str], dict[str, str]]:
    """Cline's CLI with its JSON messages and every tool approved (its default when given a prompt), on its
    OpenAI-compatible provider at the bridge, configured as `cline auth` writes it; with mcp_workspace, the MCP server
    in cline_mcp_settings.json (beside providers.json, where Cline reads it) and MCP_PROMPT."""
    settings = home / ".cline" / "data" / "settings"
    settings.mkdir(parents=True, exist_ok=True)
    provider = {"provider": "openai-compatible", "apiKey": PLACEHOLDER_KEY, "model": model,
                "baseUrl": f"http://127.0.0.1:{port}/v1"}
    (settings / "providers.json").write_text(json.dumps({
        "version": 1, "lastUsedProvider": "openai-compatible", "modes": {},
        # Without updatedAt Cline takes the entry for none and writes it again without its key and URL.
        "providers": {"openai-compatible": {"settings": provider, "updatedAt": "2026-01-01T00:00:00.000Z",
                                            "tokenSource": "manual"}},
    }, indent=2))
    if mcp_workspace is not None:
        (settings / "cline_mcp_settings.json").write_text(json.dumps(cline_mcp_settings(mcp_workspace), indent=2))
    return ["cline", "--json", "--auto-approve", "true", "-P", "openai-compatible", "-m", model,
            MCP_PROMPT if mcp_workspace else PROMPT], {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="epg-cli-agent")
    parser.add_argument("--cli", choices=CLIS, required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--effort", default="")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--relay-socket", default="/epg/host/relay.sock")
    parser.add_argument("--workspace", type=Path, default=Path("/workspace"))
    args = parser.parse_args(argv)

    ready = threading.Event()
    threading.Thread(target=serve_bridge, args=(args.port, args.relay_socket, ready), daemon=True).start()
    if not ready.wait(10):
        print("the relay bridge did not start", file=sys.stderr)
        return 1
    home = Path(os.environ.get("HOME", "/tmp"))
    link_skills(args.cli, home, Path(os.environ["EPG_SKILLS"]) if os.environ.get("EPG_SKILLS") else None)
    mcp = args.workspace if args.cli in MCP_KINDS else None
    feed: str | None = None  # what the CLI's standard input gets (else nothing)
    if args.cli == "codex":
        command, extra = codex_command(args.model, args.effort or "medium", args.port, home, mcp)
    elif args.cli == "opencode":
        command, extra = opencode_command(args.model, args.port, home, mcp)
    elif args.cli == "aider":
        command, extra, feed = aider_command(args.model, args.port, home)
    elif args.cli == "mini-swe-agent":
        command, extra = mini_swe_agent_command(args.model, args.port, home)
    elif args.cli == "cline":
        command, extra = cline_command(args.model, args.port, home, mcp)
    elif args.cli == "gemini":
        command, extra = gemini_command(args.model, args.port, home, mcp)
    elif args.cli == "qwen-code":
        command, extra = qwen_command(args.model, args.port, home, mcp)
    else:
        command, extra = claude_command(args.model, args.effort or None, args.port, home, mcp)
    environment = {**os.environ, **extra}
    if feed is not None:
        return subprocess.run(command, cwd=args.workspace, env=environment, input=feed.encode()).returncode
    return subprocess.run(command, cwd=args.workspace, env=environment, stdin=subprocess.DEVNULL).returncode


if __name__ == "__main__":
    sys.exit(main())
