"""On-demand benchmarks; each prints a table. Not part of the test suite."""
