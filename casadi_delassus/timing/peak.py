"""This machine's measured peaks, so that benchmarks can state instructions/ns as a fraction of
what a core can do (``bench --batch N``, bench/batch.py, bench/peak.py): small C kernels of independent accumulator chains (enough of them to
cover the latency of every floating-point pipe), compiled here, timed in C.

- scalar add+mul: 6 chains of `a += c` and 6 of `m *= d` on doubles (no vectorisation):
  scalar floating-point operations per ns;
- AVX2 FMA: 12 chains of `a = a * m + c` on 4-double vectors: flop per ns (2 per lane);
- sin/cos: libm's sin and cos called separately, sincos, and libmvec's 4-lane sin + cos, in
  ns per angle: what a sincos per joint saves, and what the batched code pays.

``measure()`` returns them (bench/peak.py writes bench/results/peak.md and peak.json).
"""
from __future__ import annotations

import shlex
import statistics
import subprocess
import tempfile
from pathlib import Path

from ..codegen.build import accepts_native, find_compiler
from ..errors import CompilerError
from .stats import run_harness

KERNELS = r"""
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __AVX2__
#include <immintrin.h>
#endif

/* this thread's CPU time: on a shared machine wall time reads the peak low (the contact and phase benches, timed in
 * CPU time too, measured more than 100 % of a wall-time peak under load 6) */
static double now(void) { struct timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
volatile double sink;

/* 12 scalar operations per iteration: 6 independent add chains and 6 independent mul chains
 * (latency 3 on two pipes each needs 6; 12 accumulators and 2 constants fit the 16 registers) */
static double scalar_add_mul(long iters) {
  double a0 = 0, a1 = 1, a2 = 2, a3 = 3, a4 = 4, a5 = 5, c = sink + 1e-9;
  double m0 = 1, m1 = 1.1, m2 = 1.2, m3 = 1.3, m4 = 1.4, m5 = 1.5, d = sink + 0.999999999;
  for (long i = 0; i < iters; ++i) {
    a0 += c; a1 += c; a2 += c; a3 += c; a4 += c; a5 += c;
    m0 *= d; m1 *= d; m2 *= d; m3 *= d; m4 *= d; m5 *= d;
  }
  return a0 + a1 + a2 + a3 + a4 + a5 + m0 + m1 + m2 + m3 + m4 + m5;
}

#ifdef __AVX2__
/* 12 independent 4-wide FMA chains: 96 flop per iteration */
static double avx2_fma(long iters) {
  __m256d m = _mm256_set1_pd(sink + 0.999999999), c = _mm256_set1_pd(sink + 1e-9);
  __m256d x0 = _mm256_set1_pd(0.0), x1 = _mm256_set1_pd(0.1), x2 = _mm256_set1_pd(0.2), x3 = _mm256_set1_pd(0.3);
  __m256d x4 = _mm256_set1_pd(0.4), x5 = _mm256_set1_pd(0.5), x6 = _mm256_set1_pd(0.6), x7 = _mm256_set1_pd(0.7);
  __m256d x8 = _mm256_set1_pd(0.8), x9 = _mm256_set1_pd(0.9), x10 = _mm256_set1_pd(1.0), x11 = _mm256_set1_pd(1.1);
  for (long i = 0; i < iters; ++i) {
    x0 = _mm256_fmadd_pd(x0, m, c); x1 = _mm256_fmadd_pd(x1, m, c); x2 = _mm256_fmadd_pd(x2, m, c);
    x3 = _mm256_fmadd_pd(x3, m, c); x4 = _mm256_fmadd_pd(x4, m, c); x5 = _mm256_fmadd_pd(x5, m, c);
    x6 = _mm256_fmadd_pd(x6, m, c); x7 = _mm256_fmadd_pd(x7, m, c); x8 = _mm256_fmadd_pd(x8, m, c);
    x9 = _mm256_fmadd_pd(x9, m, c); x10 = _mm256_fmadd_pd(x10, m, c); x11 = _mm256_fmadd_pd(x11, m, c);
  }
  __m256d s = _mm256_add_pd(_mm256_add_pd(_mm256_add_pd(x0, x1), _mm256_add_pd(x2, x3)),
                            _mm256_add_pd(_mm256_add_pd(x4, x5), _mm256_add_pd(x6, x7)));
  s = _mm256_add_pd(s, _mm256_add_pd(_mm256_add_pd(x8, x9), _mm256_add_pd(x10, x11)));
  double out[4];
  _mm256_storeu_pd(out, s);
  return out[0] + out[1] + out[2] + out[3];
}
__m256d _ZGVdN4v_sin(__m256d);
__m256d _ZGVdN4v_cos(__m256d);
#endif

#define ANGLES 1024
static double angles[ANGLES];
/* sin and cos as two calls (the scalar code's view without gcc's sincos fusion) */
__attribute__((noinline)) static double sin_then_cos(double x) { return sin(x) + cos(x); }
static double sin_cos(long iters) {
  double s = 0;
  for (long i = 0; i < iters; ++i) s += sin_then_cos(angles[i % ANGLES]);
  return s;
}
static double fused_sincos(long iters) {
  double s = 0, a, b;
  for (long i = 0; i < iters; ++i) { sincos(angles[i % ANGLES], &a, &b); s += a + b; }
  return s;
}
#ifdef __AVX2__
static double mvec_sin_cos(long iters) {   /* per angle: one 4-lane call of each covers 4 angles */
  __m256d s = _mm256_setzero_pd();
  for (long i = 0; i < iters; i += 4) {
    __m256d x = _mm256_loadu_pd(angles + i % ANGLES);
    s = _mm256_add_pd(s, _mm256_add_pd(_ZGVdN4v_sin(x), _ZGVdN4v_cos(x)));
  }
  double out[4];
  _mm256_storeu_pd(out, s);
  return out[0] + out[1] + out[2] + out[3];
}
#endif

typedef double (*kernel)(long);
static void time_kernel(const char* name, kernel k, double seconds, int reps, double per_iter) {
  long iters = 1000;
  for (;;) {                         /* calibrate to about `seconds` per repetition */
    double t0 = now(); sink += k(iters); double t = now() - t0;
    if (t > seconds / 4) { iters = (long)(iters * seconds / t); break; }
    iters *= 4;
  }
  iters -= iters % 4;
  for (int r = 0; r < reps; ++r) {
    double t0 = now(); sink += k(iters); double t = now() - t0;
    printf("%s %.6f\n", name, per_iter * (double)iters / (t * 1e9));
  }
}

int main(int argc, char** argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 0.2;
  int reps = argc > 2 ? atoi(argv[2]) : 5;
  for (int i = 0; i < ANGLES; ++i) angles[i] = -3.1 + 6.2 * i / ANGLES;
  time_kernel("scalar_add_mul_ops_per_ns", scalar_add_mul, seconds, reps, 12);
#ifdef __AVX2__
  time_kernel("avx2_fma_flop_per_ns", avx2_fma, seconds, reps, 96);
  time_kernel("libmvec_sin_cos_angles_per_ns", mvec_sin_cos, seconds, reps, 1);
#endif
  time_kernel("libm_sin_cos_angles_per_ns", sin_cos, seconds, reps, 1);
  time_kernel("libm_sincos_angles_per_ns", fused_sincos, seconds, reps, 1);
  return 0;
}
"""
LABELS = {
    "scalar_add_mul_ops_per_ns": "scalar add+mul peak (ops/ns)",
    "avx2_fma_flop_per_ns": "AVX2 FMA peak (flop/ns)",
    "libm_sin_cos_angles_per_ns": "libm sin and cos, two calls (ns per angle)",
    "libm_sincos_angles_per_ns": "libm sincos, one call (ns per angle)",
    "libmvec_sin_cos_angles_per_ns": "libmvec 4-lane sin + cos (ns per angle)",
}
PER_ANGLE = {"libm_sin_cos_angles_per_ns", "libm_sincos_angles_per_ns", "libmvec_sin_cos_angles_per_ns"}


def measure(reps=5, seconds=0.2, cc=None):
    """{kernel: {"best": …, "median": …}}: rates (higher is better) over ``reps`` runs; the
    sin/cos kernels also as ns per angle (``ns_best``, ``ns_median``)."""
    cc = find_compiler(cc)
    with tempfile.TemporaryDirectory(prefix="cd-peak-") as d:
        src, exe = Path(d) / "peak.c", Path(d) / "peak"
        src.write_text(KERNELS)
        native = ["-march=native"] if accepts_native(cc) else []
        proc = subprocess.run([*shlex.split(cc), "-O2", "-fno-tree-vectorize", "-fno-tree-slp-vectorize",
                               "-fno-builtin-sin", "-fno-builtin-cos", *native, "-o", str(exe), str(src), "-lm"],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise CompilerError(f"compiling the peak kernels failed: {proc.stderr.strip()[:300]}")
        out = run_harness([exe, seconds, reps], "measuring the machine's peaks")
    rates = {}
    for line in out.splitlines():
        name, value = line.split()
        rates.setdefault(name, []).append(float(value))
    res = {}
    for name, v in rates.items():
        res[name] = {"best": max(v), "median": statistics.median(v)}
        if name in PER_ANGLE:
            res[name] |= {"ns_best": 1 / max(v), "ns_median": 1 / statistics.median(v)}
    return res
