"""The Delassus matrix Λ⁻¹ = J M⁻¹ Jᵀ: one module per algorithm (registry.py lists them)."""
