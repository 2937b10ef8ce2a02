"""The Policy ABI's wire: the typed value codec, length-prefixed framing and the code mirrors (no I/O beyond a socket)."""
