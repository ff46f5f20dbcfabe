"""Symbolic kernels over CasADi SX that know nothing of algorithms: structural-zero scalar
arithmetic, the one LDLᵀ and its solves, spatial algebra, every joint transform, the split of a Function into re-evaluation stages."""
