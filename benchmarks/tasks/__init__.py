"""Benchmark tasks for benchmarks/tokens.py: definitions, the fixture world, one script per task."""
