"""Independent checks of the generated functions: the NumPy reference (shares no code with
the algorithms), the Pinocchio oracle, and the comparison of outputs with them."""
