"""Deprecated: casadi_delassus.codegen.inputs moved to casadi_delassus.runtime.inputs (the runtime
side of the codegen split, issue 24); this name is the same module and warns."""
import sys
import warnings

from ..runtime import inputs as _module

warnings.warn("casadi_delassus.codegen.inputs is now casadi_delassus.runtime.inputs", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _module
