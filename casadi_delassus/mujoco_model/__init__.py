"""MuJoCo's model as mathematics: for one compiled ``MjModel``, the physics of ``mj_forward`` and
``mj_step`` apart from collision detection, written over casadi.SX (what the generated C of
``cd.mujoco_rollout`` is made from) with NumPy references where the mathematics is not
MuJoCo's own output, and MuJoCo's soft contact model on the compiled contact step (``cd.mujoco_contact_step``).
It owns MuJoCo's physics; the contact problem and its solvers are contact/'s, which it builds on.  Each piece is checked against MuJoCo itself on many random states
(tests/mujoco_model/).

- ``features.py``: what a model uses; what it uses and this package does not model is refused
  by name (one ModelError line), never ignored; ``model.py``: the checked model and its Robot.
- ``kinematics.py``: MuJoCo's forward kinematics (bodies, sites, quaternion chain, dof axes),
  point Jacobians, velocities and accelerations, in the world frame as MuJoCo has them.
- ``smooth.py``, ``passive.py``, ``actuators.py``: M with armature (the package's CRBA),
  qfrc_bias (the package's RNE), qfrc_passive, qfrc_actuator, qacc_smooth.
- ``soft.py``, ``constraints.py``: the efc rows (contacts given as input, joint limits, friction
  loss, equality) with MuJoCo's J, pos, margin, R, D and a_ref (soft_contacts.py reads them).
- ``solver.py``, ``forward.py``: a NumPy reference solve of MuJoCo's convex problem (primal
  Newton) and a forward pass on it.
- ``integrators.py``: Euler (implicit joint damping), implicitfast and RK4 on top of a NumPy
  forward, and what ``mujoco.rollout.rollout`` records.
- ``sensors.py``: the supported sensors.
- ``soft_contacts.py``, ``soft_step.py``, ``soft_admm.py``: MuJoCo's soft numbers per contact as arrays,
  MuJoCo's soft contact problem on the contact step's SX (contact/step.py; its C codegen/mujoco_step.py, its call
  runtime/mujoco_step.py, ``cd.mujoco_contact_step`` mujoco/step.py) and the NumPy twin of its C ADMM loop
  (on contact/admm.py's iteration).
- ``geoms.py``, ``pairs.py``, ``collision.py``: each geom's world pose as SX of q; which geom
  pairs can collide, as MuJoCo's collision driver decides, with their mixed contact parameters;
  each pair's fixed contact candidates (distance, position, frame) as SX of q and the numeric rule
  that picks MuJoCo's active contacts among them (pair kinds not generated are refused by name).

It imports model/, symbolic/, sweeps/, dynamics/, contact/, constraints and errors; never codegen/,
runtime/, verify/ or timing/ (tests/project/test_imports.py).  docs/mujoco_model.md has what is supported
and refused, the measured agreement with MuJoCo 4.0, and what ``mujoco.rollout`` records."""
