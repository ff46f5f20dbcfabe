"""MuJoCo computing the same Delassus matrix J M⁻¹ Jᵀ as a generated function, for the batch
benchmark (batch_bench.py, ``bench --batch N``, bench/batch.py): the robot's URDF loaded by MuJoCo (meshes, visuals and collision
geometry stripped: only the kinematic tree and the inertias matter; fixed joints kept as
bodies so that every link is a frame; a free joint on the root for a floating base), one site
per constraint at the link frame (plus the point's offset), and

    mj_kinematics, mj_comPos, mj_crb, mj_factorM      (M and its sparse LᵀDL factor)
    mj_jacSite per constraint, rotated into the site frame ([linear; angular] in the link's
    axes, as our 6d and 3d rows)
    mj_solveM (M⁻¹ Jᵀ), then J (M⁻¹ Jᵀ)

in Python (``delassus``: the cross-check against ours) and in a C loop against the mujoco
wheel's libmujoco (``MujocoHarness``: the timing, 1 or more threads, one mjData each).
J M⁻¹ Jᵀ does not depend on how velocities are parametrised (MuJoCo's free joint takes the
world-frame linear velocity, Pinocchio's the local one), so the matrices agree entry by entry.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
import tempfile
from pathlib import Path

import numpy as np

from ..verify import pinocchio_oracle as oracle
from .stats import Timing, compile_harness, parse_timings, run_harness
from .render import ENV


def strip_urdf(urdf_text, **attrs):
    """The URDF without <visual>/<collision> (no meshes to find), and the links whose inertia
    MuJoCo rejects (not positive definite: go1's 1e-6 kg placeholder "base" link) made
    diagonal; ``attrs``: more attributes of MuJoCo's <compiler> (fusestatic="true", ...); returns
    (text, [changed links])."""
    root = ET.fromstring(urdf_text)
    changed = []
    for link in root.iter("link"):
        for tag in ("visual", "collision"):
            for e in link.findall(tag):
                link.remove(e)
        inertia = link.find("inertial/inertia")
        if inertia is None:
            continue
        g = {k: float(inertia.get(k, 0)) for k in ("ixx", "iyy", "izz", "ixy", "ixz", "iyz")}
        I = np.array([[g["ixx"], g["ixy"], g["ixz"]], [g["ixy"], g["iyy"], g["iyz"]], [g["ixz"], g["iyz"], g["izz"]]])
        if np.linalg.eigvalsh(I).min() <= 0:
            for k in ("ixy", "ixz", "iyz"):
                inertia.set(k, "0")
            changed.append(link.get("name"))
    compiler = ET.SubElement(ET.SubElement(root, "mujoco"), "compiler")
    compiler.set("discardvisual", "true")
    for k, v in attrs.items():
        compiler.set(k, v)
    return ET.tostring(root, encoding="unicode"), changed


class MujocoModel:
    """MuJoCo's model of ``robot`` with one site per constraint of ``constraints`` (6d/3d
    frame specs); ``qpos(q)`` maps a Pinocchio-layout q to MuJoCo's qpos."""

    def __init__(self, robot, constraints):
        import mujoco
        self.mujoco = mujoco
        text, self.changed_inertias = strip_urdf(Path(robot.source).read_text())
        spec = mujoco.MjSpec.from_string(text)
        if robot.floating_base:
            spec.worldbody.first_body().add_freejoint()
        self.kinds = []
        for k, c in enumerate(constraints.specs):
            frame = oracle.frame_spec(c)
            if frame is None:
                raise ValueError(f"MuJoCo comparison supports LINK:6d and LINK:3d[@x,y,z], not {c}")
            kind, link, offset = frame
            body = spec.body(link)
            if body is None:
                raise ValueError(f"MuJoCo's model has no body {link!r}")
            body.add_site(name=f"cd_site_{k}", pos=list(offset))
            self.kinds.append(6 if kind == "6d" else 3)
        self.model = spec.compile()
        self.data = mujoco.MjData(self.model)
        self.sites = [self.model.site(f"cd_site_{k}").id for k in range(len(self.kinds))]
        self.m = sum(self.kinds)
        self._layout = []
        for b in robot.bodies:
            j = b.joint
            if j.kind == "free":
                self._layout.append(("free", b.q_index, int(self.model.jnt_qposadr[self.model.joint(0).id])))
            elif j.nq:
                self._layout.append((j.kind, b.q_index, int(self.model.joint(j.name).qposadr[0])))
        if self.model.nv != robot.nv:
            raise ValueError(f"MuJoCo's model has nv = {self.model.nv}, ours {robot.nv}")

    def qpos(self, q):
        out = np.zeros(self.model.nq)
        for kind, i, a in self._layout:
            if kind == "free":
                out[a:a + 3] = q[i:i + 3]
                out[a + 3:a + 7] = q[i + 6], q[i + 3], q[i + 4], q[i + 5]     # (x, y, z, w) -> (w, x, y, z)
            elif kind == "continuous":
                out[a] = np.arctan2(q[i + 1], q[i])
            else:
                out[a] = q[i]
        return out

    def delassus(self, q):
        mj, m, d = self.mujoco, self.model, self.data
        d.qpos[:] = self.qpos(q)
        for step in (mj.mj_kinematics, mj.mj_comPos, mj.mj_crb, mj.mj_factorM):
            step(m, d)
        rows = []
        for site, kind in zip(self.sites, self.kinds):
            jacp, jacr = np.zeros((3, m.nv)), np.zeros((3, m.nv))
            mj.mj_jacSite(m, d, jacp, jacr, site)
            R = d.site_xmat[site].reshape(3, 3)
            rows += [R.T @ jacp] + ([R.T @ jacr] if kind == 6 else [])
        J = np.vstack(rows)
        X = np.zeros_like(J)
        mj.mj_solveM(m, d, X, J)
        return J @ X.T


HARNESS = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <mujoco/mujoco.h>

/* usage: mj_timing MODEL.mjb SITES.txt QPOS.bin SAMPLES CALLS REPS WARMUP THREADS
 * SITES.txt: "site kind" per constraint (kind 6 or 3).  Each thread owns an mjData and makes
 * CALLS/THREADS evaluations of J M^-1 J^T cycling over the samples; one "ns <per config>"
 * line per repetition (wall clock), then "out <D of sample 0, column-major>". */
static mjModel* m;
static int nc, rows, site[64], kind[64];
static long samples, calls;
static double* qpos;
typedef struct { mjData* d; long calls; double* J; double* X; double* D; pthread_barrier_t* b; int index; } share;

static void delassus(share* s, long k) {
  mjData* d = s->d;
  int nv = m->nv, r = 0;
  memcpy(d->qpos, qpos + k * m->nq, sizeof(double) * m->nq);
  mj_kinematics(m, d); mj_comPos(m, d); mj_crb(m, d); mj_factorM(m, d);
  double jp[3 * 512], jr[3 * 512];
  for (int c = 0; c < nc; ++c) {
    mj_jacSite(m, d, jp, jr, site[c]);
    const double* R = d->site_xmat + 9 * site[c];      /* rows of R^T are R's columns */
    for (int a = 0; a < 3; ++a)
      for (int j = 0; j < nv; ++j) {
        s->J[(r + a) * nv + j] = R[a] * jp[j] + R[3 + a] * jp[nv + j] + R[6 + a] * jp[2 * nv + j];
        if (kind[c] == 6)
          s->J[(r + 3 + a) * nv + j] = R[a] * jr[j] + R[3 + a] * jr[nv + j] + R[6 + a] * jr[2 * nv + j];
      }
    r += kind[c];
  }
  mj_solveM(m, d, s->X, s->J, rows);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j <= i; ++j) {
      double acc = 0;
      for (int k2 = 0; k2 < nv; ++k2) acc += s->J[i * nv + k2] * s->X[j * nv + k2];
      s->D[i + rows * j] = s->D[j + rows * i] = acc;
    }
}

@BIND@

static void* work(void* p) {
  share* s = (share*)p;
  bind_to(s->index);
  if (s->b) pthread_barrier_wait(s->b);
  for (long c = 0; c < s->calls; ++c) delassus(s, c % samples);
  return NULL;
}

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return 1e9 * t.tv_sec + t.tv_nsec; }

int main(int argc, char** argv) {
  if (argc != 9) { fprintf(stderr, "usage: %s MODEL.mjb SITES.txt QPOS.bin SAMPLES CALLS REPS WARMUP THREADS\n", argv[0]); return 2; }
  char err[1000];
  m = mj_loadModel(argv[1], NULL);
  if (!m) { fprintf(stderr, "cannot load %s\n", argv[1]); return 1; }
  FILE* fs = fopen(argv[2], "r");
  while (nc < 64 && fscanf(fs, "%d %d", &site[nc], &kind[nc]) == 2) rows += kind[nc++];
  fclose(fs);
  samples = atol(argv[4]); calls = atol(argv[5]);
  long reps = atol(argv[6]), warmup = atol(argv[7]);
  int threads = atoi(argv[8]);
  qpos = malloc(sizeof(double) * m->nq * samples);
  FILE* fq = fopen(argv[3], "rb");
  if (!fq || fread(qpos, sizeof(double), m->nq * samples, fq) != (size_t)(m->nq * samples)) { fprintf(stderr, "bad %s\n", argv[3]); return 1; }
  fclose(fq);
  (void)err;
  bind_init();
  pthread_barrier_t b;
  pthread_barrier_init(&b, NULL, threads);
  share sh[64];
  for (int t = 0; t < threads; ++t) {
    sh[t].index = t;
    sh[t].d = mj_makeData(m);
    sh[t].J = calloc(rows * m->nv, sizeof(double)); sh[t].X = calloc(rows * m->nv, sizeof(double));
    sh[t].D = calloc(rows * rows, sizeof(double)); sh[t].b = &b;
    sh[t].calls = warmup;
    work(&(share){ sh[t].d, warmup, sh[t].J, sh[t].X, sh[t].D, NULL, t });
  }
  for (int t = 0; t < threads; ++t) sh[t].calls = calls / threads;
  for (long r = 0; r < reps; ++r) {
    pthread_t tid[64];
    for (int t = 1; t < threads; ++t) pthread_create(&tid[t], NULL, work, &sh[t]);
    if (threads > 1) pthread_barrier_wait(&b);
    double t0 = now();
    share s0 = sh[0]; s0.b = NULL;
    work(&s0);
    for (int t = 1; t < threads; ++t) pthread_join(tid[t], NULL);
    printf("ns %.4f\n", (now() - t0) / (double)(calls / threads * threads));
  }
  delassus(&sh[0], 0);
  printf("out");
  for (int k = 0; k < rows * rows; ++k) printf(" %.17g", sh[0].D[k]);
  printf("\n");
  return 0;
}
"""


class MujocoHarness:
    """MuJoCo's J M⁻¹ Jᵀ timed in C (libmujoco of the mujoco wheel) on configurations ``qs``."""

    def __init__(self, mj, qs, calls=10_000, threads=1, cc="gcc", label=None):
        import mujoco
        self.calls, self.threads, self.samples = int(calls), int(threads), len(qs)
        self.label = label or f"mujoco x{threads}"
        self._tmp = tempfile.TemporaryDirectory(prefix="cd-mj-timing-")
        d = Path(self._tmp.name)
        self.mjb, self.sites, self.qfile, self.exe = d / "model.mjb", d / "sites.txt", d / "qpos.bin", d / "mj_timing"
        mujoco.mj_saveModel(mj.model, str(self.mjb), None)
        self.sites.write_text("".join(f"{s} {k}\n" for s, k in zip(mj.sites, mj.kinds)))
        np.concatenate([mj.qpos(q) for q in qs]).tofile(self.qfile)
        root = Path(mujoco.__file__).parent
        lib = next(root.glob("libmujoco.so*"))
        (d / "mj_timing.c").write_text(HARNESS.replace("@BIND@", ENV.get_template("bind_threads.c.j2").render()))
        compile_harness([cc, "-O2", "-pthread", f"-I{root / 'include'}", "-o", self.exe, d / "mj_timing.c", lib,
                         f"-Wl,-rpath,{root}"], "the MuJoCo harness", cc)

    def run(self, reps=1):
        out = run_harness([self.exe, self.mjb, self.sites, self.qfile, self.samples, self.calls, reps,
                    max(self.samples, 200), self.threads], "MuJoCo C timing")
        ns, first = parse_timings(out)
        return Timing(self.label, f"C loop over mj_* ({self.threads} thread(s))", ns, self.calls, self.samples, first)

    def close(self):
        self._tmp.cleanup()
