"""The model relay: the agent's only way to its model provider, served by the Host on a Unix socket."""
