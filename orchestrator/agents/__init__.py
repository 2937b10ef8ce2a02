"""Built-in agents that run inside the agent container and speak only the Host API."""
