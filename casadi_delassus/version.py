"""The package's version: one definition, imported by every module that writes it into an artifact or a cache key
(and re-exported by the package as ``casadi_delassus.__version__``)."""
__version__ = "0.1.0"
