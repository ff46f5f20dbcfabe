"""Forward, inverse and constrained dynamics: one module per algorithm (registry.py lists them)."""
