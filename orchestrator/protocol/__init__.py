"""The Host-side protobuf form of published Episode outcomes (the codec, framing and code mirrors are `epg_sdk.protocol`)."""
