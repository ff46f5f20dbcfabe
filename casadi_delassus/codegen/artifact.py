"""Deprecated: casadi_delassus.codegen.artifact moved to casadi_delassus.runtime.artifact (the runtime
side of the codegen split, issue 24); this name is the same module and warns."""
import sys
import warnings

from ..runtime import artifact as _module

warnings.warn("casadi_delassus.codegen.artifact is now casadi_delassus.runtime.artifact", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _module
