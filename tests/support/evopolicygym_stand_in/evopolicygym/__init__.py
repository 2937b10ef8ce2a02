"""A test-only stand-in for the `evopolicygym` import package, used until compat/evopolicygym is in the tree."""
