"""The agent side of the Host API: a small client, the `epg-session` command and EvoPolicyGym's `evopolicygym-session` (run inside the agent container)."""
