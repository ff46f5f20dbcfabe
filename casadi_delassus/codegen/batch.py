"""Deprecated: casadi_delassus.codegen.batch was split (issue 24) into codegen.vectorise (the
batched C: vectorize, render, io_layout, signature, macros, target) and runtime.batch (calling
it: evaluate, cores, aligned_empty, MIN_SHARE_INSTRUCTIONS, …); this module re-exports both
and warns."""
import warnings

from ..runtime.batch import MIN_SHARE_INSTRUCTIONS, aligned_empty, cores, evaluate, is_batched  # noqa: F401
from .vectorise import io_layout, macros, render, signature, target, vectorize  # noqa: F401

warnings.warn("casadi_delassus.codegen.batch is now codegen.vectorise (the C) and runtime.batch (the call)",
              DeprecationWarning, stacklevel=2)
