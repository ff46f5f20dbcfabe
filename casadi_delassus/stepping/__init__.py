"""The compiled contact step's entry points: ``contact_step`` and ``ContactStep`` (contact.py), the C rollout
for a linear feedback that simulation/ runs (rollout.py) and ``step_derivatives`` (derivatives.py).  Each resolves
and checks what the user gives once (robot, contact candidates, solver, friction), builds through the compile side
(codegen/contact_step.py, contact_rollout.py, step_derivatives.py) and loads through the runtime
(runtime/contact_step.py, contact_rollout.py, step_derivatives.py); the mathematics is contact/'s.  As
casadi_delassus/mujoco/ does for ``cd.mujoco_rollout`` and ``cd.mujoco_contact_step``."""
