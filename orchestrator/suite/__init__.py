"""Suites: many Runs (Benchmarks x agents x repeats) under one protocol, run with a bound, resumed, and ranked."""
