"""`epg-orchestrate view`: a read-only local web app over a runs or suites directory, live while Runs write to it."""
