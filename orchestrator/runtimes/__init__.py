"""Programs that run inside containers; each imports only what its image has."""
