"""Benchmarks, and the renderer of their tables into README.md and docs/."""
