"""Generated protobuf modules of the epg.v1 protocol."""
