"""epg-orchestrator: the containerised sandbox orchestrator for EvoPolicyGym."""

__version__ = "0.1.0"

# Version of the Policy ABI (frames, Program layout, `make_policy` contract).
# It is part of every Program digest.
ABI_VERSION = 1
