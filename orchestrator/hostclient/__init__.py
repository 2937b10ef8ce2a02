"""The agent side of the Host API: a small client and the `epg-session` command (runs inside the agent container)."""
