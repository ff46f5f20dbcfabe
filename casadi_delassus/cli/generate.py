"""``generate``: trace, emit, compile and load each algorithm; print the files."""
from __future__ import annotations

import click

from .. import api
from ..codegen.build import check_osim
from ..verify.workflow import cuda_built, host_check_text
from .main import cli
from .options import (ROBOT_HELP, algorithm_names, cflag_tuple, compile_target, compile_target_opts, derivative_names,
                      derivative_opts, gen_opts, mimic_opt, osim_opt, resolve, trace_opts, with_options)


@cli.command(epilog=ROBOT_HELP)
@with_options(trace_opts)
@osim_opt
@with_options(gen_opts)
@click.option("--package", "package_dir", default=None, metavar="DIR",
              help="also write a self-contained C package (sources, Makefile, CMakeLists.txt, README, example) to DIR")
@click.option("--stages", is_flag=True,
              help="generate the re-evaluation stages instead: <algo>_factor (q), [<algo>_damping (R),] <algo>_apply, "
                   "each taking the previous stage's stored intermediates")
@with_options(derivative_opts)
@click.option("--casadi-derivatives", is_flag=True,
              help="also compile CasADi's derivative functions (fwd1_/adj1_/jac_<function>) into the .so (<algo>-casadi), "
                   "so that casadi.external(<function>, <so>) is differentiable inside CasADi")
@with_options(compile_target_opts(
    "cuda: also write <algo>-cuda.cu, a batched CUDA kernel of the C function (docs/gpu.md)",
    "single: compute in float (C: <algo>-single files; cuda: <algo>-cuda-f32.cu), its error against double measured "
    "and stored in the manifest (docs/precision.md)",
    "the CUDA kernel's internal layout: entry-major (soa) or configuration-major (aos)"))
@mimic_opt
def generate(robot, fixed_base, scenario, specs, algorithms, cse, osim, out_dir, cflags, cc, force, name, package_dir, stages,
             derivatives, wrt, method, casadi_derivatives, target, precision, layout, mimic):
    """Generate, compile and load C for each algorithm; print the files."""
    derivatives = derivative_names(derivatives, wrt)
    compiled_for = compile_target(target, precision, layout, package=bool(package_dir), stages=stages)
    t = resolve(robot, scenario, specs, fixed_base, mimic=mimic)
    made, algorithms = [], algorithm_names(algorithms)
    for a in algorithms:            # refuse before generating anything
        check_osim(a, osim)
    for a in algorithms:
        for d in derivatives or [None]:
            f = api.generate(t.robot, t.constraints, a, out_dir=out_dir, cflags=cflag_tuple(cflags), cc=cc, cse=cse,
                             force=force, osim=osim, stages=stages, name=name, derivative=d, wrt=wrt, method=method,
                             casadi_derivatives=casadi_derivatives, target=target, precision=precision, layout=layout)
            made += _echo(a, d, f, compiled_for, stages)
    if package_dir:
        from ..codegen.package import write_package
        write_package(package_dir, made)
        click.echo(f"C package -> {package_dir} (make, or cmake -S {package_dir} -B build; see its README.md)")


def _echo(a, d, f, compiled_for, stages):
    """Print what was made of algorithm ``a`` (derivative ``d``); the C functions a --package takes."""
    if compiled_for.target == "cuda":
        for g in f if stages else [f]:
            _echo_cuda(a, g)
        return [g.c_function for g in (f if stages else [f])]        # --package: the C beside it
    if stages:
        for g in f.stages:
            m = g.manifest
            click.echo(f"{a} stage {m['stage']['name']}: {m['op_count']['instructions']:,} instructions, "
                       f"stores {m['outputs'][0]['shape'][0] if m['stage']['work_out'] else 0} values, "
                       f"sz_w {m['sz_w']:,} -> {g.so_path.with_suffix('.{c,h,so,json}')}")
        return list(f.stages)
    m = f.manifest
    if "auto" in m:
        click.echo(f"auto -> {m['auto']['chosen']}: {m['auto']['reason']}")
    what = f"{a} {d} with respect to {','.join(m['derivative']['wrt'])}" if d else a
    extra = "".join(f", {c['function']} {c['op_count']['instructions']:,}" for c in m.get("casadi_derivatives", []))
    click.echo(f"{what}: {m['op_count']['instructions']:,} instructions{extra} -> {f.so_path.with_suffix('.{c,h,so,json}')}")
    if compiled_for.precision == "single":
        p = f.precision
        click.echo(f"single precision: error against double max {p['max_rel_error']:.1e}, median "
                   f"{p['median_rel_error']:.1e} over {p['samples']} samples (relative to the largest output entry)")
    return [f]


def _echo_cuda(algorithm, f):
    """One line per CUDA function: what was built, whether it can run here, and what its host
    build (the shim) was measured against at build."""
    m = f.manifest
    click.echo(f"{algorithm} ({m['function']}): CUDA {m['precision']['type']} {m['layout']}, "
               f"{m['op_count']['instructions']:,} instructions; {cuda_built(m)}; {host_check_text(m)} -> "
               f"{f.manifest_path.with_suffix('.cu')}")
