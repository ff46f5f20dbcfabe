"""The options and argument helpers the commands share, and the one place that resolves what a
command targets: the robot and its constraints (``resolve``), the compile target
(``compile_target``)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import click
import numpy as np

from .. import api
from ..codegen.build import DEFAULT_CFLAGS
from ..codegen.derivatives import DERIVATIVES, METHODS
from ..codegen.precision import PRECISIONS
from ..codegen.target import LAYOUTS, TARGETS, refuse, resolve as resolve_target
from ..contact.candidates import FORM as CANDIDATE_FORM, HELP as CANDIDATE_HELP, scenario_candidates
from ..errors import InputError
from ..model import FORMATS, load_robot
from ..registry import ALGORITHMS, AUTO, AUTO_RULE, get_algorithm

# --samples of `check` and `step`: each sample is a compiled call and an oracle's (NumPy, Pinocchio: up to tens of ms
# on the big robots), so these are about an hour of work at most; more is a mistake, not a check
CHECK_MAX_SAMPLES, STEP_MAX_SAMPLES = 100_000, 10_000
ROBOT_HELP = f"ROBOT is {FORMATS}."
robot_arg = click.argument("robot")
base_opt = click.option("--fixed-base/--floating-base", "fixed_base", default=None,
                        help="fix a URDF model's root link to the world, or put it on a free base (default: the "
                             "model's own: URDF files float, registry robots as listed by `robots`); the output "
                             "folder name says which")
mimic_opt = click.option("--mimic", is_flag=True,
                         help="couple a URDF model's mimic joints as Pinocchio's mimic=True does (q and v without "
                              "them; algorithm naive only); the output folder name says _mimic")
scenario_opt = click.option("--scenario", "-s", help="named constraint scenario of the robot (default: its first)")
constraint_opt = click.option("-c", "--constraint", "specs", multiple=True, metavar="SPEC",
                              help="constraint LINK:6d, LINK:3d[@x,y,z], world-aligned rows LINK:6d-world, LINK:3d-world[@x,y,z], "
                                   "LINK:random6|random3, LINK:6d-input|3d-input, link-to-link A|B:6d, "
                                   "A|B:3d[@ax,ay,az[;bx,by,bz]], joint rows JOINT:NAME (repeatable; `links ROBOT` "
                                   "lists the names)")
algo_opt = click.option("-a", "--algorithm", "algorithms", multiple=True, metavar="ALGO",
                        help=f"algorithm(s): {', '.join(ALGORITHMS)}, 'auto' (the default) or 'all'.  {AUTO_RULE}")
cse_opt = click.option("--cse/--no-cse", default=True, show_default=True, help="apply CasADi's common-subexpression elimination")
jobs_opt = click.option("--jobs", "-j", type=click.IntRange(min=1), default=None, metavar="N",
                        help="independent jobs on N local processes (default: every core; 1: one by one in this process)")
osim_opt = click.option("--osim", is_flag=True, help="also output Λ (the OSIM) through an LDLᵀ of the Delassus matrix")
derivative_opts = [
    click.option("--derivative", "derivatives", multiple=True, type=click.Choice([*DERIVATIVES, "all"]),
                 help="the derivative instead of the value (repeatable; 'all': jvp, vjp and jacobian): jvp takes seeds "
                      "<input>_dot and returns <output>_dot, vjp takes <output>_bar and returns <input>_bar, jacobian "
                      "returns d<output>_d<input>; q derivatives in the tangent space (q ⊕ δ, the model's integrate)"),
    click.option("--wrt", default=None, metavar="INPUTS",
                 help="comma-separated inputs to differentiate with respect to (q, v, tau, k, R, lam, a, K_<link>; "
                      "default all)"),
    click.option("--derivative-method", "method", type=click.Choice(METHODS), default="auto", show_default=True,
                 help="ad: CasADi's AD; analytic: the algorithm's analytical Jacobians; auto: analytic for Jacobians "
                      "where the algorithm has them")]
gen_opts = [click.option("-o", "--out", "out_dir", default=str(api.DEFAULT_OUT), show_default=True,
                         help="output root; files go to OUT/<name>/<scenario>/ (see --name)"),
            click.option("--cflags", default=None, help="compiler flags (default: 'auto' = -O2, or lower for huge functions)"),
            click.option("--cc", default=None, help="C compiler (default: $CC, gcc, cc, clang)"),
            click.option("--force", is_flag=True, help="regenerate even if the cache is up to date"),
            click.option("--name", default=None, metavar="NAME",
                         help="the model's folder and C name (letters and digits joined by single underscores); "
                              "default: the registry or synthetic name, or a model file's stem plus a hash of its path")]


def with_options(opts):
    """Apply a list of click decorators in the order listed."""
    def deco(f):
        for o in reversed(opts):
            f = o(f)
        return f
    return deco


# ROBOT plus how its constraints are chosen: every command that targets one scenario
target_opts = [robot_arg, base_opt, scenario_opt, constraint_opt]
trace_opts = [*target_opts, algo_opt, cse_opt]


def compile_target_opts(target_help, precision_help, layout_help):
    """--target, --precision and --layout, each with the command's own help."""
    return [click.option("--target", type=click.Choice(TARGETS), default="c", show_default=True, help=target_help),
            click.option("--precision", type=click.Choice(PRECISIONS), default="double", show_default=True,
                         help=precision_help),
            click.option("--layout", type=click.Choice(LAYOUTS), default="soa", show_default=True, help=layout_help)]


def compile_target(target, precision, layout, **combined):
    """The codegen/target.Target of the options; a combination it refuses (``combined``: package,
    stages, derivatives) is a usage error."""
    try:
        return refuse(resolve_target(target, precision, layout), **combined)
    except InputError as exc:
        raise click.UsageError(str(exc)) from None


def algorithm_names(names):
    """The algorithms asked for: 'auto' when none, every one for 'all'; an unknown name fails here."""
    names = list(names) or [AUTO]
    if "all" in names:
        return list(ALGORITHMS)
    for n in names:
        if n != AUTO:
            get_algorithm(n)
    return names


def derivative_names(names, wrt=None):
    """The derivatives asked for; --wrt without one is a usage error (it would be ignored)."""
    if wrt is not None and not names:
        raise click.UsageError("--wrt picks the inputs of a derivative: give --derivative too")
    return list(DERIVATIVES) if "all" in names else list(dict.fromkeys(names))


def finite_positive(ctx, param, value):
    """A tolerance or a time: finite and above 0 (nan fails every comparison, inf passes anything)."""
    if value is not None and not (0 < value < math.inf):
        raise click.BadParameter(f"{value!r} is not a finite number above 0", ctx=ctx, param=param)
    return value


def floating(fixed_base):
    """load_robot's floating_base from --fixed-base/--floating-base (None: the model's own)."""
    return None if fixed_base is None else not fixed_base


def cflag_tuple(cflags):
    """--cflags as a tuple (default: codegen/build.py's)."""
    return tuple(cflags.split()) if cflags else DEFAULT_CFLAGS


def numbers(text, what):
    """Comma-separated numbers as a float array (a UsageError names ``what`` otherwise)."""
    try:
        return np.array([float(x) for x in text.split(",")])
    except ValueError:
        raise click.UsageError(f"{what} must be comma-separated numbers, got {text!r}") from None


@dataclass
class Resolved:
    """What a command targets: the robot, its ConstraintSet ``cs`` and scenario name, and
    ``constraints``, what api.generate is given for them (the set for -c, else the scenario)."""
    robot: object
    cs: object
    scenario: str
    constraints: object


def resolve(robot_spec, scenario, specs, fixed_base=None, say_base=True, mimic=False):
    """The Resolved target; ``say_base``: the first line of the output says which base the robot
    has and how to change it (output meant for machines leaves it out)."""
    robot = load_robot(robot_spec, floating_base=floating(fixed_base), mimic=mimic)
    if specs and scenario:
        raise click.UsageError("give either --scenario or -c constraints, not both")
    constraints = list(specs) if specs else (scenario or api.default_constraints(robot))
    cs, name = api.constraint_set(robot, constraints)
    if say_base:
        click.echo(f"{robot.name}: {robot.base_note()}")
    return Resolved(robot, cs, name, cs if specs else constraints)


contact_opts = [click.option("-c", "--contact", "contacts", multiple=True, metavar="LINK[@x,y,z][/r]", help=CANDIDATE_HELP),
                click.option("-s", "--scenario", default=None, metavar="SCENARIO",
                             help="the robot's named scenario of point constraints as the candidates (`robots` lists them)")]


def solver_opt(auto_help):
    """--solver, default auto as for algorithms."""
    return click.option("--solver", type=click.Choice(["auto", "admm", "pgs"]), default="auto", show_default=True,
                        help=auto_help)


def contact_candidates(robot, contacts, scenario):
    """The candidate specs of -c or -s (exactly one of them)."""
    if contacts and scenario:
        raise click.UsageError("give either -s SCENARIO or -c candidates, not both")
    if scenario:
        return scenario_candidates(robot, scenario)
    if not contacts:
        raise click.UsageError(f"give contact candidates: -c {CANDIDATE_FORM} (repeatable) or -s SCENARIO")
    return list(contacts)
