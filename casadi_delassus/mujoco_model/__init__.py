"""MuJoCo's model as mathematics: for one compiled MjModel, the pieces of ``mj_forward`` written
over CasADi SX (with NumPy beside them where a rule is numeric), so that the rest of the package
can generate C for that model.  It imports model/, symbolic/, sweeps/, constraints and errors,
never codegen/, runtime/, verify/ or timing/ (tests/test_imports.py).

- ``geoms``: where each geom sits on the Robot of model/mjcf.py, its world pose as SX of q;
- ``pairs``: which geom pairs can collide, as MuJoCo's collision driver decides, and their
  mixed contact parameters; pair kinds we do not generate refused by name;
- ``collision``: each pair's fixed contact candidates (distance, position, frame) as SX of q,
  and the numeric rule that picks MuJoCo's active contacts among them.
"""
