"""The command line: presentation only (typer, rich)."""
