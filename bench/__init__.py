"""Performance benchmarks: each module prints its figures and a ratio measured in one run."""
