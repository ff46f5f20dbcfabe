"""Deprecated: casadi_delassus.codegen.loader moved to casadi_delassus.runtime.loader (the runtime
side of the codegen split, issue 24); this name is the same module and warns."""
import sys
import warnings

from ..runtime import loader as _module

warnings.warn("casadi_delassus.codegen.loader is now casadi_delassus.runtime.loader", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _module
