"""Test stand-in of the `evopolicygym` import package: the values and authoring types the adapter uses."""
