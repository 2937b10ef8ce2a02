"""Protocol codecs: typed values and length-prefixed frames. No I/O policy, no Docker."""
