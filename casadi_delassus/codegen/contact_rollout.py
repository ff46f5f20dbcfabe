"""C of the whole rollout (issue 27; contact/rollout.py has its mathematics): ``<name>_rollout`` runs steps of the
loop of simulation/simulate.py under a fixed linear feedback (simulation/feedback.py), and ``<name>_rollout_batch`` N
of them on the threads of runtime/pool.h: templates/contact_rollout.c.j2 around the contact step's C
(codegen/contact_step.py; ``keep_active`` masks the active set on either linear solve) and the loop's SX (integrate, the
candidates' positions, the free step), compiled once per hash of what determines it (build_cached, kind "rollout").
runtime/contact_rollout.py loads and calls it; stepping/rollout.py is the entry simulation/ uses."""
from __future__ import annotations

import casadi as ca

from ..constraints import ConstraintSet
from ..contact.rollout import loop_functions
from ..opcount import count_ops
from ..registry import AUTO
from ..runtime import artifact
from ..runtime.compiler import find_compiler
from ..version import __version__
from .build import build_cached, host_cpu
from .contact_step import DEFAULT_CFLAGS, DEFAULT_OUT, build_key, render, scenario_name, step_cflags, step_parts
from .emit import TEMPLATES
from .escape import Safe
from .trace import trace


def build(robot, cs, positions, out_dir=DEFAULT_OUT, cflags=DEFAULT_CFLAGS, cc=None, delassus=AUTO, model=None,
          linear_solve="dense"):
    """Compile the rollout for the contacts ``cs`` and candidate positions ``positions`` (cached by a hash of what
    determines it); returns its manifest's path (sealed: runtime/contact_rollout.py loads it).  ``linear_solve``: ADMM's
    damped inverse as the step's build takes it (contact_step.py step_parts; "dense", the rollout's default)."""
    cc = find_compiler(cc)
    model = artifact.model_name(robot, model)
    scenario = scenario_name("rollout", cs.specs)
    name = artifact.function_name(model, scenario, "rollout")
    auto = any(f.startswith("auto") for f in cflags)
    q = ca.SX.sym("q", robot.nq)
    key = build_key(robot, cs, cflags, cc, delassus=delassus, host=host_cpu() if auto else None,
                    rollout=str(ca.densify(positions(q))), linear_solve=linear_solve)

    def make():
        prep, post, chosen, factor, solve, route = step_parts(robot, cs, name, delassus, linear_solve)
        aba = trace(robot, ConstraintSet(robot, [], allow_empty=True), "aba", cse=True)[0]
        loop = loop_functions(robot, positions, name, aba)
        flags = step_cflags(cflags, sum(count_ops(f)["instructions"] for f in (prep, post, *loop)), cc) if auto else cflags
        text = TEMPLATES.get_template("contact_rollout.c.j2").render(
            fname=Safe(name), robot=robot.name, contacts=" ".join(cs.specs), version=__version__,
            step_code=Safe(render(robot, cs, name, prep, post, chosen, factor, solve, loop)))
        manifest = {"function": name, "robot": robot.name, "contacts": cs.specs, "delassus": chosen,
                    "linear_solve": route, "nq": robot.nq, "nv": robot.nv, "m": cs.m, "cflags": list(flags), "version": __version__}
        return text, [*flags, "-pthread"], manifest
    return build_cached(artifact.folder(out_dir, model, scenario), f"rollout_{key[:16]}", make, cc, key, "rollout")
