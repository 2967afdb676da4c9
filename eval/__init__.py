"""Evaluation harness: datasets, metrics, benchmarks."""
