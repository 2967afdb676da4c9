"""The benchmarks, one module (or a small package) each; ``livetrans bench NAME`` runs one.

Shared helpers (servers, tables, plots, datasets, metrics) stay in ``eval/``.
"""
