"""Program-evolution Runs: the spec, the Host side of a Run, and its phases."""
