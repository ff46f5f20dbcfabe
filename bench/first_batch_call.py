"""Where the first large batch call's time goes: go1 4F3 (naive), Q of 100,000 random
configurations from ``robot.random_q(rng, n)`` against a loop of ``random_q``; ``f(Q)``
four times (a fresh 115 MB output each), ``f(Q, out=D)`` into a preallocated D, and the
time to first touch 115 MB of fresh zeros (the kernel's page faults, no computing).

    taskset -c 1 .venv/bin/python bench/first_batch_call.py

prints the times (one run: a first call happens once per process)."""
from __future__ import annotations

import tempfile
import time

import numpy as np

import common  # noqa: F401

import casadi_delassus as cd

N = 100_000


def timed(label, call):
    t0 = time.perf_counter()
    value = call()
    print(f"{label}: {time.perf_counter() - t0:.3f} s")
    return value


def main():
    robot = cd.load_robot("go1")
    with tempfile.TemporaryDirectory() as tmp:
        f = cd.generate(robot, "4F3", "naive", out_dir=tmp)
        Q = timed(f"random_q(rng, {N:,})", lambda: robot.random_q(np.random.default_rng(0), N))
        timed(f"a loop of {N:,} random_q(rng)", lambda: [robot.random_q(np.random.default_rng(0)) for _ in range(N)])
        for k in range(4):
            D = timed(f"f(Q) call {k + 1} (a fresh output)", lambda: f(Q))
            del D
        out = np.empty((N, 12, 12))
        timed("f(Q, out=D), D preallocated", lambda: f(Q, out=out))
        timed("first touch of 115 MB of fresh zeros", lambda: np.zeros((N, 12, 12)).fill(1.0))


if __name__ == "__main__":
    main()
