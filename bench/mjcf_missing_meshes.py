"""Time of loading an MJCF model whose mesh files are all missing (the fallback of
casadi_delassus/model/mjcf.py that compiles it again without its meshes), for n meshes
(issue 23, fuzz point 9: it must grow linearly).  Interleaved repetitions, median and spread.

    taskset -c 0 .venv/bin/python bench/mjcf_missing_meshes.py 250 500 1000 2000 --reps 3"""
import argparse
import contextlib
import io
import statistics
import time

from casadi_delassus.model.mjcf import compile_mjcf, mujoco_module


def model_text(n):
    """n bodies on hinges off the world (MuJoCo's XML reader limits nesting), each with one
    geom on its own missing mesh file."""
    assets = "".join(f'<mesh name="m{i}" file="missing{i}.stl"/>' for i in range(n))
    bodies = "".join(f'<body name="b{i}" pos="0 0 0.1"><joint type="hinge"/><geom type="mesh" mesh="m{i}"/>'
                     f'<geom type="sphere" size="0.05"/></body>' for i in range(n))
    return f'<mujoco model="meshes"><asset>{assets}</asset><worldbody>{bodies}</worldbody></mujoco>'


def once(text):
    """(seconds of the load with the fallback, seconds of MuJoCo's own first, failing load)."""
    t0 = time.perf_counter()
    with contextlib.redirect_stderr(io.StringIO()):
        compile_mjcf(text=text)
    t1 = time.perf_counter()
    try:
        mujoco_module().MjModel.from_xml_string(text)
    except ValueError:
        pass
    return t1 - t0, time.perf_counter() - t1


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sizes", type=int, nargs="+")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    texts = {n: model_text(n) for n in args.sizes}
    times = {n: [] for n in args.sizes}
    first = {n: [] for n in args.sizes}
    for _ in range(args.reps):
        for n in args.sizes:          # interleaved: drift hits every size alike
            total, mine = once(texts[n])
            times[n].append(total)
            first[n].append(mine)
    base = args.sizes[0]
    for n in args.sizes:
        med, load = statistics.median(times[n]), statistics.median(first[n])
        print(f"{n:6d} meshes: median {med:7.3f} s (min {min(times[n]):.3f}, max {max(times[n]):.3f}), "
              f"{med / statistics.median(times[base]):6.2f}x the {base}-mesh time; MuJoCo's own failing load "
              f"{load:.3f} s, the whole fallback {med / load:.1f}x that")


if __name__ == "__main__":
    main()
