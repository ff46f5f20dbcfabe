"""MuJoCo as the contact step's anchor (issue 33): a model of a contact problem (verify/contact_problems.py,
timing/a1_problem.py) with exactly the physics of our step, and its ``mj_forward`` timed in C.

The model: the robot's URDF with visuals and collisions dropped and the inertias MuJoCo rejects made diagonal
(mujoco_harness.strip_urdf), fixed links fused, a free base, and one sphere of radius RADIUS per contact whose lowest
point is the contact point at the problem's state, put 1e-9 m into the plane (so that MuJoCo's collision test, which
keeps distances ≤ its margin 0, finds each of them: our step takes every contact it is given; talos_stand's soles
are rolled 1.7 mrad, so four of its corners move down 0.17 mm), condim 3 and friction μ, on a plane.  What our step
does not have is removed (``only_contacts``): joint damping, friction loss (go1.urdf's friction 0.2 gave one
constraint row per joint: 12 rows beside the 12 of the contacts), limits, and the equality constraints MuJoCo makes
of URDF mimic joints (talos's grippers: 12 rows; ours, as Pinocchio, moves mimic joints independently), so that
MuJoCo's constraint rows are the contacts' own (checked: ``rows``).  MuJoCo's contacts stay its soft ones (solref, solimp: its defaults), so that its answer is
close to ours, not equal: ``v_next`` is compared with a stated tolerance.

``MujocoForwardHarness`` times ``mj_forward`` (the step's dynamics, collision detection included: MuJoCo finds its
contacts in it, ours are given) in a C loop against the wheel's libmujoco, in thread CPU time as the contact bench
times ours."""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from ..errors import DelassusError
from .mujoco_harness import strip_urdf
from .stats import Timing, compile_harness, parse_timings, run_harness

RADIUS = 1e-3
SINK = 1e-9
TOL = 1e-8
SOLVERS = ("PGS", "CG", "Newton")
CONES = ("pyramidal", "elliptic")


def only_contacts(m):
    """Remove from MuJoCo's model ``m`` what our step does not compute: joint damping, friction loss, limits and
    equality constraints (URDF mimic joints)."""
    import mujoco
    m.dof_damping[:] = 0.0
    m.dof_frictionloss[:] = 0.0
    m.jnt_limited[:] = 0
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_EQUALITY


def rows(m, d):
    """(constraint rows, rows that are not contacts) of MuJoCo's last mj_forward."""
    import mujoco
    kinds = np.asarray(d.efc_type[:d.nefc])
    contact = (mujoco.mjtConstraint.mjCNSTR_CONTACT_FRICTIONLESS, mujoco.mjtConstraint.mjCNSTR_CONTACT_PYRAMIDAL,
               mujoco.mjtConstraint.mjCNSTR_CONTACT_ELLIPTIC)
    return int(d.nefc), int(np.sum(~np.isin(kinds, [int(c) for c in contact])))


def _contact_links(p):
    """(link, contact point in the link's frame, link rotation, the point's height) per contact of problem ``p`` at
    its state."""
    import pinocchio as pin
    data = p.model.createData()
    pin.framesForwardKinematics(p.model, data, p.q)
    out = []
    for spec, f in zip(p.specs, p.frames):
        link, point = spec.split(":", 1)[0], np.array([float(x) for x in spec.split("@", 1)[1].split(",")])
        out.append((link, point, data.oMf[f].rotation, data.oMf[f].translation[2]))
    return out


def _urdf_text(p):
    """The URDF of problem ``p`` (``robot``: a name of verify/contact_problems.ROBOTS or a path)."""
    from ..verify import contact_problems as cp
    path = cp._robots_dir() / cp.ROBOTS[p.robot][0] if p.robot in cp.ROBOTS else Path(p.robot)
    return path.read_text()


def model(p, solver="Newton", cone="elliptic"):
    """(MjModel, MjData at the problem's state after mj_forward) of problem ``p`` (module docstring): ``solver``
    one of SOLVERS, ``cone`` one of CONES, tolerance TOL, at most 10,000 iterations, no warm start, dt = p.dt."""
    import mujoco
    if solver not in SOLVERS or cone not in CONES:
        raise DelassusError(f"MuJoCo: solver one of {', '.join(SOLVERS)} and cone one of {', '.join(CONES)}")
    text, _ = strip_urdf(_urdf_text(p), fusestatic="true", balanceinertia="false")
    spec = mujoco.MjSpec.from_string(text)
    spec.worldbody.first_body().add_freejoint()
    for link, point, R, height in _contact_links(p):
        spec.body(link).add_geom(type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[RADIUS, 0, 0],
                                 pos=list(point + R.T @ np.array([0.0, 0.0, RADIUS - SINK - height])), condim=3,
                                 friction=[float(p.mu[0]), 0.0, 0.0])
    spec.worldbody.add_geom(type=mujoco.mjtGeom.mjGEOM_PLANE, size=[5, 5, 0.1], condim=3,
                            friction=[float(p.mu[0]), 0.0, 0.0])
    m = spec.compile()
    only_contacts(m)
    m.opt.timestep, m.opt.tolerance, m.opt.iterations = p.dt, TOL, 10_000
    m.opt.cone = getattr(mujoco.mjtCone, f"mjCONE_{cone.upper()}")
    m.opt.solver = getattr(mujoco.mjtSolver, f"mjSOL_{solver.upper()}")
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_WARMSTART
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:], d.qfrc_applied[:] = qpos(p, m), dofs(p, m, p.v), dofs(p, m, p.tau)
    mujoco.mj_forward(m, d)
    return m, d


def _joints(p, m):
    """(Pinocchio's q index, v index, MuJoCo's qpos address, dof address) of each one-DoF joint, by name."""
    out = []
    for j in range(2, p.model.njoints):
        mj = m.joint(p.model.names[j])
        out.append((p.model.joints[j].idx_q, p.model.joints[j].idx_v, int(mj.qposadr[0]), int(mj.dofadr[0])))
    return out


def qpos(p, m):
    """MuJoCo's qpos of the problem's q (free joint first: position, quaternion w x y z)."""
    out = np.zeros(m.nq)
    out[:3], out[3:7] = p.q[:3], [p.q[6], *p.q[3:6]]
    for iq, _, a, _ in _joints(p, m):
        out[a] = p.q[iq]
    return out


def dofs(p, m, x):
    """A velocity-space vector of Pinocchio's layout in MuJoCo's (the base's six first: with the problems' identity
    base orientation, MuJoCo's world-frame linear velocity is Pinocchio's local one)."""
    if not np.allclose(p.q[3:7], [0, 0, 0, 1]):
        raise DelassusError("MuJoCo's free-joint velocity equals Pinocchio's only at identity base orientation")
    out = np.zeros(m.nv)
    out[:6] = x[:6]
    for _, iv, _, a in _joints(p, m):
        out[a] = x[iv]
    return out


def v_next(p, m, d):
    """MuJoCo's v + dt qacc in Pinocchio's layout (its semi-implicit Euler's velocity, no damping left)."""
    x = d.qvel + p.dt * d.qacc
    out = np.zeros(p.model.nv)
    out[:6] = x[:6]
    for _, iv, _, a in _joints(p, m):
        out[iv] = x[a]
    return out


HARNESS = r"""
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <mujoco/mujoco.h>

/* usage: mj_forward_timing MODEL.mjb STATE.bin CALLS REPS WARMUP
 * STATE.bin: mj_stateSize(m, mjSTATE_INTEGRATION) doubles (mj_getState's layout).  Each repetition times CALLS calls
 * of mj_forward in this thread's CPU time: one "ns <per call>" line; then "out <iterations> <nefc> <ncon> <qacc>". */
static double cpu_ns(void) { struct timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return 1e9 * t.tv_sec + t.tv_nsec; }

int main(int argc, char** argv) {
  if (argc != 6) { fprintf(stderr, "usage: %s MODEL.mjb STATE.bin CALLS REPS WARMUP\n", argv[0]); return 2; }
  mjModel* m = mj_loadModel(argv[1], NULL);
  if (!m) { fprintf(stderr, "cannot load %s\n", argv[1]); return 1; }
  mjData* d = mj_makeData(m);
  int n = mj_stateSize(m, mjSTATE_INTEGRATION);
  double* state = malloc(sizeof(double) * n);
  FILE* fs = fopen(argv[2], "rb");
  if (!fs || fread(state, sizeof(double), n, fs) != (size_t)n) { fprintf(stderr, "bad %s\n", argv[2]); return 1; }
  fclose(fs);
  mj_setState(m, d, state, mjSTATE_INTEGRATION);
  long calls = atol(argv[3]), reps = atol(argv[4]), warmup = atol(argv[5]);
  for (long c = 0; c < warmup; ++c) mj_forward(m, d);
  for (long r = 0; r < reps; ++r) {
    double t0 = cpu_ns();
    for (long c = 0; c < calls; ++c) mj_forward(m, d);
    printf("ns %.4f\n", (cpu_ns() - t0) / (double)calls);
  }
  printf("out %d %d %d", d->solver_niter[0], d->nefc, d->ncon);
  for (int k = 0; k < m->nv; ++k) printf(" %.17g", d->qacc[k]);
  printf("\n");
  return 0;
}
"""


class MujocoForwardHarness:
    """``mj_forward`` of MuJoCo's model ``m`` at the state of ``d``, timed in C (thread CPU time); ``run(reps)`` gives
    a Timing whose output is (iterations, constraint rows, contacts, qacc...)."""

    def __init__(self, m, d, calls=2000, cc="gcc", label="MuJoCo mj_forward"):
        import mujoco
        self.calls, self.label = int(calls), label
        self._tmp = tempfile.TemporaryDirectory(prefix="cd-mj-forward-")
        tmp = Path(self._tmp.name)
        self.mjb, self.state, self.exe = tmp / "model.mjb", tmp / "state.bin", tmp / "mj_forward_timing"
        mujoco.mj_saveModel(m, str(self.mjb), None)
        kind = mujoco.mjtState.mjSTATE_INTEGRATION
        state = np.zeros(mujoco.mj_stateSize(m, kind))
        mujoco.mj_getState(m, d, state, kind)
        state.tofile(self.state)
        root = Path(mujoco.__file__).parent
        lib = next(root.glob("libmujoco.so*"))
        (tmp / "mj_forward_timing.c").write_text(HARNESS)
        compile_harness([cc, "-O2", f"-I{root / 'include'}", "-o", self.exe, tmp / "mj_forward_timing.c", lib,
                         f"-Wl,-rpath,{root}"], "the MuJoCo mj_forward harness", cc)

    def run(self, reps=1):
        out = run_harness([self.exe, self.mjb, self.state, self.calls, reps, min(self.calls, 200)],
                          "MuJoCo mj_forward timing")
        ns, first = parse_timings(out)
        return Timing(self.label, "C loop over mj_forward (thread CPU time)", ns, self.calls, 1, first)

    def close(self):
        self._tmp.cleanup()
