"""Runtime of generated C, measured in C, against Pinocchio on the same inputs.

- ``time_c`` (c_harness.py): one generated function timed by a C program that dlopen()s its
  ``.so``; per-call nanoseconds of R repetitions over N prepared input sets (stats.py).
- ``time_pinocchio`` (pinocchio.py): ``pinocchio::computeDelassusMatrix`` (or
  ``constraintDynamics`` / ``aba`` for the dynamics functions) on the same robot, constraints
  and inputs, in C++ against the ``pin`` wheel or, failing that, from Python.
- ``benchmark`` (benchmark.py): every requested algorithm and Pinocchio on one scenario,
  repetitions interleaved round by round; ``result_rows`` / ``write_results`` (results.py) make
  the terminal, Markdown, CSV and PNG outputs.
"""
from .benchmark import benchmark  # noqa: F401
from .c_harness import SOFT_COMPLIANCE, CHarness, pack_inputs, random_samples, render_c_harness, time_c  # noqa: F401
from .pinocchio_harnesses import (PIN_CPP, PIN_FUNCTIONS, PIN_PYTHON, build_pinocchio_harness, pinocchio_cpp_problem,  # noqa: F401
                        pinocchio_harness, pinocchio_k, pinocchio_label, pinocchio_mode, pinocchio_problem,
                        time_pinocchio)
from .results import HEADERS, describe, machine, result_rows, write_results  # noqa: F401
from .stats import DEFAULT_CALLS, DEFAULT_REPS, DEFAULT_SAMPLES, Timing  # noqa: F401
