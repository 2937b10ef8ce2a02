"""Run reports (diagnostics, plots, one self-contained HTML page), trajectory exports and replays, read from a run directory."""
