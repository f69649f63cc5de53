"""Metrics, benchmarks and the promotion gate."""
