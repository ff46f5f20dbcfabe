"""Deprecated: casadi_delassus.codegen.distributed moved to casadi_delassus.runtime.distributed (the runtime
side of the codegen split, issue 24); this name is the same module and warns."""
import sys
import warnings

from ..runtime import distributed as _module

warnings.warn("casadi_delassus.codegen.distributed is now casadi_delassus.runtime.distributed", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _module
