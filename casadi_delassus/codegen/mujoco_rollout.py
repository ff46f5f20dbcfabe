"""C of ``cd.mujoco_rollout`` for one MjModel: mujoco_model/rollout_parts.py's function (given as ``parts``:
codegen ranks below the mathematics of MuJoCo's model) through CasADi's
code generator, and templates/mujoco_rollout.c.j2 (contact selection, the Newton solve of MuJoCo's convex
problem, Euler with implicit damping, threads) around it, two compilation units of one file where CasADi's code
is big enough for a lower optimisation level than the solver's (build.Units); compiled once per model content (build_cached,
kind "mjrollout"; the key: sha256 of the model's MJB bytes, the package version, the flags, compiler and lanes).
With ``lanes`` (issue 33; contact_rollout.lane_flags' values), the environments of a thread step in lane groups of
CD_BATCH_LANES in lockstep, CasADi's forward computed for a group by one call of its vectorised code
(codegen/vectorise.py kernel_function), each lane's solve scalar: a lane's states are its scalar rollout's to
rounding (gcc contracts multiply-adds otherwise in the vector code: docs/mujoco.md)."""
from __future__ import annotations

import hashlib

import numpy as np

from ..runtime.compiler import find_compiler
from ..runtime import artifact
from ..runtime.door import POOL
from ..runtime.mujoco_rollout import STATUS_CODES
from ..version import __version__
from .build import AUTO_LEVELS, SCALAR_BATCH, Units, auto_context, build_cached, resolve_cflags
from .emit import TEMPLATES, casadi_source
from .escape import Safe
from . import sincos, vectorise
from .contact_rollout import lane_flags
from .trace_cache import source_hash


# The CasADi unit's levels: apart from the solver, its largest function (humanoid's forward) keeps -O2 to 40k
# instructions, where AUTO_LEVELS (sized for whole files) drops to -O1; docs/mujoco.md measures gcc's time and the step's.
CASADI_LEVELS = ((40_000, "-O2"), *((limit, level) for limit, level in AUTO_LEVELS if limit > 40_000))


def model_key(m, cflags, cc, lanes=1):
    """The build's cache key: the MJB bytes of ``m`` (mj_saveModel) with the version, the package's source hash, flags,
    compiler and lanes, and for "auto" flags what they resolve by (build.auto_context: the host CPU, a forced level)."""
    from ..model.mjcf import mujoco_module
    mujoco = mujoco_module()
    buffer = np.zeros(mujoco.mj_sizeModel(m), dtype=np.uint8)
    mujoco.mj_saveModel(m, None, buffer)
    data = hashlib.sha256(buffer.tobytes())
    data.update(repr((__version__, source_hash(), list(cflags), cc, "mjrollout", lanes)).encode())
    if any(f.startswith("auto") for f in cflags):
        data.update(auto_context().encode())
    return data.hexdigest()


def _ancestors(parent):
    """(dof, its ancestors nearest first) for each dof: the template unrolls the tree factor over them."""
    out = []
    for k in range(len(parent)):
        anc, j = [], int(parent[k])
        while j >= 0:
            anc.append(j)
            j = int(parent[j])
        out.append((k, anc))
    return out


def _row_columns(parts, tree):
    """(first entry per row and one past the last, the entries, per row whether they lie on one path to the root:
    each the ancestor of the next, ``tree`` being _ancestors'): each row's columns (RolloutParts.row_columns), an
    elliptic cone's first row with its rows' together (the C's blocks: templates/mujoco_rollout.c.j2 blocks)."""
    first, entries, chained = [], [], []
    for i, cols in enumerate(parts.row_columns):
        if parts.row_cone[i] > 0:
            cols = sorted(set().union(*parts.row_columns[i:i + parts.row_cone[i]]))
        first.append(len(entries))
        entries += cols
        chained.append(int(all(a in tree[b][1] for a, b in zip(cols, cols[1:]))))
    return [*first, len(entries)], entries, chained


def _slot_rows(row_slot, nslot):
    """Per C slot (first row, rows) of its rows (contiguous: rollout_parts appends a contact's rows together); (0, 0)
    for a slot without rows."""
    out = [[0, 0] for _ in range(nslot)]
    for i, s in enumerate(row_slot):
        if s >= 0:
            out[s] = [i, 1] if out[s][1] == 0 else [out[s][0], out[s][1] + 1]
    return out


def _mesh_tables(parts):
    """The template's arguments of the plane-mesh hulls (rollout_parts.MeshTables)."""
    mesh = parts.mesh
    index = {pair: k for k, (pair, *_) in enumerate(mesh.pairs)}
    return dict(nmesh=len(mesh.pairs), nmeshvert=len(mesh.vertices), nmeshpoly=len(mesh.poly_normals),
                pair_mesh=[index.get(i, -1) for i in range(len(parts.pairs))] + [0], mesh_pairs=mesh.pairs,
                mesh_rbound=[x[3] for x in mesh.pairs] + [0], mesh_vert=[*mesh.vertices.ravel(), 0],
                vert_poly=mesh.vertex_polys, poly_normal=[*mesh.poly_normals.ravel(), 0],
                poly_corner=[*mesh.poly_corners.ravel(), 0])


def _lane_functions(functions):
    """The vectorised C of CasADi's ``functions`` for the lane groups (``<name>_lanes``, the joint angles' sin/cos by
    the scalar functions' helper: vectorise.vectorize scalar_sincos) and the template's view of them (name, the
    sizes of the inputs and of the outputs)."""
    code = "\n\n".join(vectorise.kernel_function(f"{f.name()}_lanes", f, casadi_source(f), scalar_sincos=True)
                       for f in functions)
    views = [dict(name=f.name(), ins=[int(f.numel_in(i)) for i in range(f.n_in())],
                  outs=[int(f.numel_out(i)) for i in range(f.n_out())]) for f in functions]
    return code, views


def render(model, parts, name, lanes=False):
    """The C source and the instruction count of the traced function; every CasADi function's sin/cos of its joint
    angles computed up front, vectorised (codegen/sincos.py: the contact-pair functions each repeat their bodies'
    kinematics); with ``lanes`` the lane groups' code too."""
    m = model.m
    fwd = parts.function
    others = [f for f in (*parts.candidate_functions, *parts.pair_functions, *parts.base_functions, parts.sensor_function)
              if f is not None]
    sizes = {k: max(int(getattr(f, k)()) for f in (fwd, *others)) for k in ("sz_arg", "sz_res", "sz_iw", "sz_w")}
    layout = parts.layout
    pad = lambda xs: [*xs, 0]           # noqa: E731 -- C arrays of at least one entry
    lane_code, lane_fns = _lane_functions([fwd]) if lanes else ("", [])
    tree = _ancestors(m.dof_parentid)
    col_first, cols, chained = _row_columns(parts, tree)
    text = TEMPLATES.get_template("mujoco_rollout.c.j2").render(
        fname=Safe(name), model=model.name, version=__version__, casadi_code=Safe(sincos.hoist(casadi_source(fwd, others), TEMPLATES, functions=1 + len(others))[0]), pool_code=Safe(POOL.read_text()),
        nq=m.nq, nv=m.nv, nu=m.nu, nsens=int(m.nsensordata),
        sensor_fn=parts.sensor_function.name() if parts.sensor_function is not None else None, nrow=parts.nrow, nbase=parts.nrow - sum(n for _, n in parts.pair_rows),
        cand_fns=[f.name() if f is not None else None for f in parts.candidate_functions], pair_geoms=parts.pair_geoms,
        pair_bound=pad(parts.pair_bound), pair_plane=pad(parts.pair_plane), ngeom=max([0, *(max(g) + 1 for g in parts.pair_geoms)]),
        slot_rows=_slot_rows(parts.row_slot, parts.nslot), pair_rows=parts.pair_rows, pair_fns=[f.name() if f is not None else None for f in parts.pair_functions], base_fns=[f.name() if f is not None else None for f in parts.base_functions], nslot=parts.nslot, naux=layout.naux, npair=len(parts.pairs),
        njnt=m.njnt, timestep=float(m.opt.timestep), tolerance=max(float(m.opt.tolerance), 1e-13), implicit_damping=int(parts.implicit_damping), rk4=int(parts.integrator == "rk4"), implicitfast=int(parts.integrator == "implicitfast"), row_type=pad(parts.row_type),
        row_fl=pad(parts.row_frictionloss), row_col_first=col_first, row_cols=pad(cols), row_chained=pad(chained), row_cone=pad(parts.row_cone), row_scale=pad(parts.row_scale), slot_margin=pad(parts.slot_margin),
        casadi_entries=[f.name() for f in (fwd, *others)], pairs=parts.pairs, reach=pad([ps.reach for ps in layout.pairs]), joints=parts.joints, damping=parts.damping,
        dof_parent=[int(x) for x in m.dof_parentid], tree=tree, statuses=STATUS_CODES,
        lanes=lanes, lane_code=Safe(lane_code), lane_fns=lane_fns, **vectorise.vector_context(),
        **_mesh_tables(parts), **sizes)
    return text, max(f.n_instructions() for f in (fwd, *others))


def compile_flags(casadi_flags, flags):
    """One compile at ``flags`` where CasADi's code takes them too, else the two units of the template (build.Units)."""
    if tuple(casadi_flags) == tuple(flags):
        return [*flags, "-pthread"]
    return Units(((*casadi_flags, "-pthread"), (*flags, "-pthread")))


def build(model, rollout_parts, out_dir, cflags=("auto",), cc=None, lanes=1):
    """The manifest path of the compiled rollout of MujocoModel ``model`` (built once per content and ``lanes``), its
    RolloutParts traced by ``rollout_parts(model, name)`` when it is not in the cache; ``lanes``: 1 (none), "auto"
    (the CPU's vector width) or a power of two up to 16 (a one-line InputError otherwise)."""
    cc = find_compiler(cc)
    extra = lane_flags(lanes)
    key = model_key(model.m, cflags, cc, lanes)
    label = artifact.model_name(model.robot, None)
    name = f"mjrollout_{key[:12]}"

    def make():
        parts = rollout_parts(model, f"{name}_fwd")
        text, instructions = render(model, parts, name, lanes != 1)
        casadi_flags = (*(f for f in resolve_cflags(cflags, instructions, cc, levels=CASADI_LEVELS)
                          if lanes == 1 or f != SCALAR_BATCH), *extra)      # both units of one lane count
        flags = (*resolve_cflags(cflags, 0, cc), *extra)
        manifest = {"function": name, "model": model.name, "nq": model.nq, "nv": model.nv, "nu": model.nu,
                    "nrow": parts.nrow, "nslot": parts.nslot, "nsensordata": int(model.m.nsensordata), "cflags": list(flags),
                    "cflags_casadi": list(casadi_flags), "lanes": lanes, "version": __version__}
        return text, compile_flags(casadi_flags, flags), manifest
    return build_cached(artifact.folder(out_dir, label, "mjrollout"), f"mjrollout_{key[:16]}", make, cc, key, "mjrollout")
