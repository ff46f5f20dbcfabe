"""Delassus operators applied to vectors, matrix-free and explicit: one module per operator
(registry.py lists them)."""
