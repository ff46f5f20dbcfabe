"""Simulation on the contact step: the time-stepping loop and its scenes (contact candidates against a ground plane,
stopping statuses, Baumgarte's gap term: simulate.py), N environments at once (simulate_batch.py), the fixed linear
feedback the C rollout runs (feedback.py), the NumPy reference step (reference_step.py) and the rollouts' CSV and
plots (rollout_io.py).  The contact problem and its solvers are contact/'s; contact/ and mujoco_model/ never import
this package (tests/project/test_imports.py)."""
