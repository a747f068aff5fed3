"""Benchmarks: speed ratios against baselines measured in the same process (`make bench`)."""
