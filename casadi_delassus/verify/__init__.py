"""Independent checks of the generated functions: the NumPy reference (shares no code with
the algorithms), the Pinocchio and MuJoCo oracles, the comparison of outputs with them and the check workflow;
the compiled contact step against the NumPy path (step_check.py) and its derivatives against finite differences
(step_derivative_check.py); every mode of a built contact-mode library (library_check.py, the Library passed in)."""
