"""Programs that run inside containers (the policy runtime, the environment runner); each imports only what its image has."""
