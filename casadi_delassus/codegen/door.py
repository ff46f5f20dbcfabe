"""Deprecated: casadi_delassus.codegen.door moved to casadi_delassus.runtime.door (the runtime
side of the codegen split, issue 24); this name is the same module and warns."""
import sys
import warnings

from ..runtime import door as _module

warnings.warn("casadi_delassus.codegen.door is now casadi_delassus.runtime.door", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _module
