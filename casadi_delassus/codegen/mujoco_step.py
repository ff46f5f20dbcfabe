"""C of MuJoCo's soft contact step (mujoco_model/soft_step.py has its mathematics): the contact step's SX parts emitted by
CasADi and templates/mujoco_step.c.j2 around them (MuJoCo's efc rows, the ADMM solve over the cone), compiled once per
hash of what determines it (build_cached, kind "mjsoft").  runtime/mujoco_step.py loads and calls it;
``cd.mujoco_contact_step`` (mujoco/step.py) is the entry."""
from __future__ import annotations

import numpy as np

from ..mujoco_model.soft_step import contact_blocks, soft_functions
from ..contact.result import SOFT_OPTIONS, STATUS_CODES
from ..runtime import artifact
from ..runtime.compiler import find_compiler
from ..version import __version__
from . import schedule, sincos
from .build import build_cached
from .contact_step import build_key, delassus_function, scenario_name
from .emit import TEMPLATES, casadi_source
from .escape import Safe


def render(robot, cs, name, prep, post, delassus):
    """The C source of the MuJoCo-model step."""
    sizes = {k: max(int(getattr(f, k)()) for f in (prep, post)) for k in ("sz_arg", "sz_res", "sz_iw", "sz_w")}
    ne = contact_blocks(cs)
    code = sincos.hoist(schedule.reorder(casadi_source(prep, [post])), TEMPLATES)[0]
    return TEMPLATES.get_template("mujoco_step.c.j2").render(
        fname=Safe(name), robot=robot.name, contacts=" ".join(cs.specs), version=__version__, delassus=delassus,
        casadi_code=Safe(code), nv=robot.nv, nc=len(ne), mw=cs.m, mmax=sum(10 if k == 6 else 4 for k in ne),
        woff=np.cumsum([0] + ne[:-1]).tolist(), ne=ne, nw=int(prep.numel_out(4)), options=SOFT_OPTIONS, statuses=STATUS_CODES,
        **sizes)


def build(robot, cs, out_dir, cflags, cc, delassus):
    """Compile the step (cached by a hash of everything that determines it); returns its manifest's path (sealed:
    load it with runtime/library.open_sealed)."""
    cc = find_compiler(cc)
    scenario = scenario_name("mjsoft", cs.specs)
    name = artifact.function_name(artifact.model_name(robot, None), scenario, "mjsoft")
    key = build_key(robot, cs, cflags, cc, delassus=delassus)

    def make():
        chosen, fn = delassus_function(robot, cs, delassus)
        prep, post = soft_functions(robot, cs, name, fn)
        manifest = {"function": name, "robot": robot.name, "contacts": cs.specs, "delassus": chosen, "nq": robot.nq,
                    "nv": robot.nv, "nc": len(contact_blocks(cs)), "cflags": list(cflags),
                    "version": __version__}
        return render(robot, cs, name, prep, post, chosen), cflags, manifest
    return build_cached(artifact.folder(out_dir, artifact.model_name(robot, None), scenario), f"mjsoft_{key[:16]}",
                        make, cc, key, "mjsoft")
