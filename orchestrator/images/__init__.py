"""Offline image builds: a bootstrapped base, a host-filled wheelhouse, content-hash tags."""
