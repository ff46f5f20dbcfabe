/* casadi_delassus runtime/door.c: the thin Python door of a generated function (see door.py).
 *
 * One extension type, Door, a base class of every CompiledFunction (runtime/loader.py), bound by
 * Door.__init__ to one checked CasADi function pointer (the loader checks the library and the
 * symbol; this code only calls what it is given).  Calling it, f(q, **inputs, out=None),
 * evaluates the function for one instance when every input is already what the C code
 * reads; anything else goes to the instance's Python method _evaluate, which converts the
 * inputs or refuses them with its one-line message (one code path: runtime/inputs.as_input):
 *   - each input a float64 numpy array, native byte order, aligned, of the manifest's shape
 *     (a vector also as n x 1), C-contiguous (a matrix also Fortran-contiguous);
 *   - every entry finite, R > 0, every unit block of q (quaternion, (cos, sin) pair) within
 *     unit_tol of norm 1; it is normalised here exactly as inputs.as_input does (the sum of
 *     squares in order, one square root, one division per entry; no contraction);
 *   - ``out`` None, or a writeable float64 array of the output's shape, C- or
 *     Fortran-contiguous (a dict of such arrays by output name for _door_call's all outputs);
 *   - no threads= (a batch option).
 * A batch of q (Q, N x nq float64, any order) of a function of q alone goes straight to the
 * batch runtime below (batch_call); every other batch reaches it through _evaluate, which
 * converts and checks the values once and calls run_batch.
 * _door_call(first, inputs, out, all) does the same for CompiledFunction.outputs and returns
 * NotImplemented where f(q) would hand on; _door_raw(values, out, all) takes the flat
 * column-major arrays inputs.as_input returns.  Being the instance's own type, the call costs
 * no Python frame (a Python __call__ costs more than the rest of the door).
 *
 * No allocation on the way but the returned arrays (none with out=, and none in a steady loop
 * D = f(q) or D = f(Q): see fresh_array and fresh_batch): the pointer arrays, CasADi's work
 * arrays and the inputs' column-major copies live in a Set taken from a pool and put back,
 * both under the GIL; the call itself runs without the GIL, so threads run in parallel and a
 * second concurrent caller gets a Set of its own (allocated once, kept). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef int (*casadi_fn)(const double** arg, double** res, long long* iw, double* w, int mem);
/* <fn>_batch_arrays of a generated function (float64 or float32 entries: see batches) */
typedef int (*batch_arrays)(long long n, const void** x, void** y);

enum { CHECK_FINITE = 0, CHECK_POSITIVE = 1 };
#define POOL_KEEP 64            /* Sets kept for reuse; more concurrent callers free theirs */
#define RING 2                  /* arrays kept per output to be handed out again (see fresh_array) */
/* f(Q)'s outputs up to this size are kept to be handed out again (see fresh_batch): at most
   RING of them per function stay allocated after their caller dropped them */
#define BATCH_KEEP_BYTES ((npy_intp)256 << 20)

typedef struct {
  PyObject* name;               /* interned */
  Py_ssize_t rows, cols, size;  /* the C code's column-major rows x cols */
  int vector, check;
  Py_ssize_t offset;            /* of its copy in Set.in */
} InSpec;

typedef struct {
  PyObject* name;
  int ndim;
  npy_intp dims[2];
  Py_ssize_t rows, cols, size;
  Py_ssize_t offset;            /* of its column-major scratch in Set.out */
  PyObject* ring[RING];         /* arrays this door returned, kept to be reused once released */
  int next;
} OutSpec;

typedef struct Set {
  struct Set* next;
  const double** arg;
  double** res;
  long long* iw;
  double* w;
  double* in;
  double* out;
} Set;

typedef struct {
  PyObject_HEAD
  casadi_fn fn;
  PyObject* keep;               /* what keeps the library mapped */
  PyObject* error;              /* exception class for a failed call */
  PyObject* label;              /* the function's name, for that error */
  int n_in, n_out, release_gil;
  Py_ssize_t sz_arg, sz_res, sz_iw, sz_w, in_total, out_total;
  InSpec* in;
  OutSpec* out;
  Py_ssize_t* units;            /* (start, length) pairs of q's unit blocks */
  int n_units, q_index;         /* q's input index, -1 if none */
  double unit_tol;
  Set* pool;
  int pooled;
  batch_arrays batch_fn;   /* <fn>_batch_arrays, for f(Q) of q alone */
  PyObject* batch_ring[RING];   /* f(Q)'s outputs this door returned, kept to be reused once released */
  int batch_next;
  long long batch_lanes, batch_per_instance, batch_min_share;   /* how run_batch splits (see batches) */
} Door;

/* -- Sets ----------------------------------------------------------------------------------- */
static size_t round_up(size_t n) { return (n + 63) & ~(size_t)63; }

static Set* set_new(Door* d) {
  size_t a = round_up(sizeof(double*) * (size_t)d->sz_arg), r = round_up(sizeof(double*) * (size_t)d->sz_res);
  size_t iw = round_up(sizeof(long long) * (size_t)d->sz_iw), w = round_up(sizeof(double) * (size_t)d->sz_w);
  size_t in = round_up(sizeof(double) * (size_t)d->in_total), out = round_up(sizeof(double) * (size_t)d->out_total);
  size_t head = round_up(sizeof(Set));
  char* p = NULL;
  if (posix_memalign((void**)&p, 64, head + a + r + iw + w + in + out) != 0) return NULL;
  Set* s = (Set*)p;
  p += head;
  s->next = NULL;
  s->arg = (const double**)p; p += a;
  s->res = (double**)p; p += r;
  s->iw = (long long*)p; p += iw;
  s->w = (double*)p; p += w;
  s->in = (double*)p; p += in;
  s->out = (double*)p;
  memset(s->arg, 0, a);
  memset(s->res, 0, r);
  return s;
}

static Set* take_set(Door* d) {       /* under the GIL */
  Set* s = d->pool;
  if (s) {
    d->pool = s->next;
    d->pooled--;
    return s;
  }
  s = set_new(d);
  if (!s) PyErr_NoMemory();
  return s;
}

static void give_set(Door* d, Set* s) {   /* under the GIL */
  if (d->pooled >= POOL_KEEP) { free(s); return; }
  s->next = d->pool;
  d->pool = s;
  d->pooled++;
}

/* -- transposes ------------------------------------------------------------------------------ */
/* dst (rows x cols, row-major) = src (column-major): 4 x 4 blocks in AVX registers where the
 * CPU has AVX, else 2 x 2 in SSE2 (x86-64) or entry by entry; a third to a half of the time
 * of the plain loop (12 x 12: 60 -> 21 ns, 24 x 24: 200 -> 60 ns) */
static void transpose_plain(Py_ssize_t rows, Py_ssize_t cols, Py_ssize_t i, const double* src, double* dst) {
  for (; i < rows; ++i)
    for (Py_ssize_t j = 0; j < cols; ++j) dst[i * cols + j] = src[i + rows * j];
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
__attribute__((target("avx"))) static void transpose_avx(Py_ssize_t rows, Py_ssize_t cols, const double* src,
                                                          double* dst) {
  Py_ssize_t i = 0;
  for (; i + 4 <= rows; i += 4) {
    Py_ssize_t j = 0;
    for (; j + 4 <= cols; j += 4) {
      const double* s = src + i + rows * j;
      __m256d r0 = _mm256_loadu_pd(s), r1 = _mm256_loadu_pd(s + rows);
      __m256d r2 = _mm256_loadu_pd(s + 2 * rows), r3 = _mm256_loadu_pd(s + 3 * rows);
      __m256d u0 = _mm256_unpacklo_pd(r0, r1), u1 = _mm256_unpackhi_pd(r0, r1);
      __m256d u2 = _mm256_unpacklo_pd(r2, r3), u3 = _mm256_unpackhi_pd(r2, r3);
      double* d = dst + i * cols + j;
      _mm256_storeu_pd(d, _mm256_permute2f128_pd(u0, u2, 0x20));
      _mm256_storeu_pd(d + cols, _mm256_permute2f128_pd(u1, u3, 0x20));
      _mm256_storeu_pd(d + 2 * cols, _mm256_permute2f128_pd(u0, u2, 0x31));
      _mm256_storeu_pd(d + 3 * cols, _mm256_permute2f128_pd(u1, u3, 0x31));
    }
    for (; j < cols; ++j)
      for (int k = 0; k < 4; ++k) dst[(i + k) * cols + j] = src[i + k + rows * j];
  }
  transpose_plain(rows, cols, i, src, dst);
}

static void transpose_sse2(Py_ssize_t rows, Py_ssize_t cols, const double* src, double* dst) {
  Py_ssize_t i = 0;
  for (; i + 2 <= rows; i += 2) {
    Py_ssize_t j = 0;
    for (; j + 2 <= cols; j += 2) {
      __m128d c0 = _mm_loadu_pd(src + i + rows * j), c1 = _mm_loadu_pd(src + i + rows * (j + 1));
      _mm_storeu_pd(dst + i * cols + j, _mm_unpacklo_pd(c0, c1));
      _mm_storeu_pd(dst + (i + 1) * cols + j, _mm_unpackhi_pd(c0, c1));
    }
    for (; j < cols; ++j) {
      dst[i * cols + j] = src[i + rows * j];
      dst[(i + 1) * cols + j] = src[i + 1 + rows * j];
    }
  }
  transpose_plain(rows, cols, i, src, dst);
}

static int has_avx;
static void transpose(Py_ssize_t rows, Py_ssize_t cols, const double* src, double* dst) {
  if (has_avx)
    transpose_avx(rows, cols, src, dst);
  else
    transpose_sse2(rows, cols, src, dst);
}
#else
static void transpose(Py_ssize_t rows, Py_ssize_t cols, const double* src, double* dst) {
  transpose_plain(rows, cols, 0, src, dst);
}
#endif

/* -- inputs --------------------------------------------------------------------------------- */
/* 1: not the fast case (the caller returns NotImplemented); 0: copied and checked */
static int take_input(const Door* d, const InSpec* s, PyObject* v, double* dst) {
  if (!PyArray_CheckExact(v)) return 1;         /* subclasses (masked arrays) go to the Python checks */
  PyArrayObject* a = (PyArrayObject*)v;
  if (PyArray_TYPE(a) != NPY_DOUBLE || !PyArray_ISNOTSWAPPED(a) || !PyArray_ISALIGNED(a)) return 1;
  int nd = PyArray_NDIM(a);
  const npy_intp* dims = PyArray_DIMS(a);
  const double* src = (const double*)PyArray_DATA(a);
  int ok = 1;
  if (s->vector) {
    if (!((nd == 1 && dims[0] == s->size) || (nd == 2 && dims[0] == s->size && dims[1] == 1))) return 1;
    if (!PyArray_IS_C_CONTIGUOUS(a)) return 1;
    memcpy(dst, src, sizeof(double) * (size_t)s->size);
  } else {
    if (nd != 2 || dims[0] != s->rows || dims[1] != s->cols) return 1;
    if (PyArray_IS_F_CONTIGUOUS(a)) {
      memcpy(dst, src, sizeof(double) * (size_t)s->size);
    } else if (PyArray_IS_C_CONTIGUOUS(a)) {
      transpose(s->cols, s->rows, src, dst);     /* row-major rows x cols = column-major cols x rows */
    } else {
      return 1;
    }
  }
  /* x - x is 0 for every finite x, NaN for inf and NaN */
  for (Py_ssize_t k = 0; k < s->size; ++k) ok &= (dst[k] - dst[k] == 0.0);
  if (s->check == CHECK_POSITIVE)
    for (Py_ssize_t k = 0; k < s->size; ++k) ok &= (dst[k] > 0.0);
  if (!ok) return 1;
  if (d->units && s == d->in + d->q_index) {
    for (int u = 0; u < d->n_units; ++u) {
      double* x = dst + d->units[2 * u];
      Py_ssize_t len = d->units[2 * u + 1];
      double sq = 0.0;
      for (Py_ssize_t k = 0; k < len; ++k) sq += x[k] * x[k];
      double norm = sqrt(sq);
      if (!(fabs(norm - 1.0) <= d->unit_tol)) return 1;
      for (Py_ssize_t k = 0; k < len; ++k) x[k] /= norm;
    }
  }
  return 0;
}

/* a flat column-major float64 array of inputs.as_input: 0 copied, -1 error set */
static int take_raw(const InSpec* s, PyObject* v, double* dst) {
  if (!PyArray_Check(v) || PyArray_TYPE((PyArrayObject*)v) != NPY_DOUBLE ||
      !PyArray_IS_C_CONTIGUOUS((PyArrayObject*)v) || !PyArray_ISNOTSWAPPED((PyArrayObject*)v) ||
      PyArray_SIZE((PyArrayObject*)v) != s->size) {
    PyErr_Format(PyExc_TypeError, "door.raw: input %U must be a contiguous float64 array of %zd entries",
                 s->name, s->size);
    return -1;
  }
  memcpy(dst, PyArray_DATA((PyArrayObject*)v), sizeof(double) * (size_t)s->size);
  return 0;
}

/* -- outputs -------------------------------------------------------------------------------- */
/* an array to write output o into: 1 not acceptable (NotImplemented), 0 fine */
static int out_ok(const OutSpec* o, PyObject* v) {
  if (!PyArray_Check(v)) return 1;
  PyArrayObject* a = (PyArrayObject*)v;
  if (PyArray_TYPE(a) != NPY_DOUBLE || !PyArray_ISNOTSWAPPED(a) || !PyArray_ISALIGNED(a) || !PyArray_ISWRITEABLE(a) ||
      PyArray_NDIM(a) != o->ndim)
    return 1;
  for (int k = 0; k < o->ndim; ++k)
    if (PyArray_DIMS(a)[k] != o->dims[k]) return 1;
  return !(PyArray_IS_C_CONTIGUOUS(a) || PyArray_IS_F_CONTIGUOUS(a));
}

/* whether the C code can write output o straight into array a (column-major memory) */
static int direct(const OutSpec* o, PyArrayObject* a) {
  return o->rows == 1 || o->cols == 1 || PyArray_IS_F_CONTIGUOUS(a);
}

static void transpose_out(const OutSpec* o, const double* src, PyArrayObject* a) {
  transpose(o->rows, o->cols, src, (double*)PyArray_DATA(a));
}

/* Evaluate with the Set s whose inputs are in place: outputs into arrays[k] (new references
 * or borrowed given ones), for k < n_eval.  Returns 0, or -1 with an error set. */
static int evaluate(Door* d, Set* s, PyArrayObject** arrays, int n_eval) {
  for (int k = 0; k < d->n_in; ++k) s->arg[k] = s->in + d->in[k].offset;
  for (int k = 0; k < d->n_out; ++k) {
    const OutSpec* o = d->out + k;
    s->res[k] = k >= n_eval ? NULL : direct(o, arrays[k]) ? (double*)PyArray_DATA(arrays[k]) : s->out + o->offset;
  }
  int rc;
  if (d->release_gil) {
    Py_BEGIN_ALLOW_THREADS
    rc = d->fn(s->arg, s->res, s->iw, s->w, 0);
    Py_END_ALLOW_THREADS
  } else {
    rc = d->fn(s->arg, s->res, s->iw, s->w, 0);
  }
  if (rc != 0) {
    PyErr_Format(d->error, "%U returned an error", d->label);
    return -1;
  }
  for (int k = 0; k < n_eval; ++k)
    if (s->res[k] != (double*)PyArray_DATA(arrays[k])) transpose_out(d->out + k, s->res[k], arrays[k]);
  return 0;
}

/* Whether the array a ring holds is held by nobody else any more (only the ring's reference
 * is left: no view, buffer export or weak reference) and is still a writeable C-contiguous
 * float64 array of ``ndim`` dimensions ``dims`` */
static int released(PyObject* x, int ndim, const npy_intp* dims) {
  PyArrayObject* a = (PyArrayObject*)x;
  if (!x || Py_REFCNT(x) != 1 || Py_TYPE(x) != &PyArray_Type || ((PyArrayObject_fields*)a)->weakreflist != NULL ||
      PyArray_TYPE(a) != NPY_DOUBLE || PyArray_NDIM(a) != ndim ||
      !PyArray_CHKFLAGS(a, NPY_ARRAY_WRITEABLE | NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED))
    return 0;
  for (int k = 0; k < ndim; ++k)
    if (PyArray_DIMS(a)[k] != dims[k]) return 0;
  return 1;
}

/* A new array for output o, or one this door returned before that nobody else holds any more
 * (released, owning its data as made): a steady loop ``D = f(q)`` then allocates nothing.
 * Under the GIL. */
static PyArrayObject* fresh_array(OutSpec* o) {
  for (int r = 0; r < RING; ++r) {
    PyArrayObject* a = (PyArrayObject*)o->ring[r];
    if (released((PyObject*)a, o->ndim, o->dims) && PyArray_BASE(a) == NULL && PyArray_CHKFLAGS(a, NPY_ARRAY_OWNDATA)) {
      o->ring[r] = NULL;
      return a;
    }
  }
  return (PyArrayObject*)PyArray_SimpleNew(o->ndim, o->dims, NPY_DOUBLE);
}

/* keep a new reference to a returned array in ``ring`` (RING entries, ``next`` the slot to
 * fill, the oldest); under the GIL */
static void keep_in(PyObject** ring, int* next, PyArrayObject* a) {
  PyObject* old = ring[*next];
  Py_INCREF(a);
  ring[*next] = (PyObject*)a;
  *next = (*next + 1) % RING;
  Py_XDECREF(old);
}

static void keep(OutSpec* o, PyArrayObject* a) { keep_in(o->ring, &o->next, a); }

/* The output arrays: ``out`` (None, an array for output 0 when !all, a dict when all) or new
 * ones.  1: not acceptable, 0: arrays[k] set (owned[k] says whether it is a new reference),
 * -1: error set. */
static int output_arrays(Door* d, PyObject* out, int all, PyArrayObject** arrays, int* owned) {
  int n = all ? d->n_out : 1;
  PyObject* given[n];
  for (int k = 0; k < n; ++k) given[k] = NULL;
  if (out != Py_None) {
    if (!all) {
      given[0] = out;
    } else {
      if (!PyDict_CheckExact(out)) return 1;
      Py_ssize_t found = 0;
      for (int k = 0; k < n; ++k)
        if ((given[k] = PyDict_GetItemWithError(out, d->out[k].name)) != NULL) found++;
        else if (PyErr_Occurred()) return -1;
      if (found != PyDict_Size(out)) return 1;          /* unknown names */
    }
    for (int k = 0; k < n; ++k)
      if (given[k] && out_ok(d->out + k, given[k])) return 1;
  }
  for (int k = 0; k < n; ++k) {
    owned[k] = given[k] == NULL;
    arrays[k] = given[k] ? (PyArrayObject*)given[k] : fresh_array(d->out + k);
    if (!arrays[k]) {
      for (int j = 0; j < k; ++j)
        if (owned[j]) Py_DECREF(arrays[j]);
      return -1;
    }
  }
  return 0;
}

static PyObject* result(Door* d, PyArrayObject** arrays, int* owned, int all) {
  for (int k = 0; k < (all ? d->n_out : 1); ++k)
    if (owned[k]) keep(d->out + k, arrays[k]);
  if (!all) {
    if (!owned[0]) Py_INCREF(arrays[0]);
    return (PyObject*)arrays[0];
  }
  PyObject* res = PyDict_New();
  for (int k = 0; res && k < d->n_out; ++k)
    if (PyDict_SetItem(res, d->out[k].name, (PyObject*)arrays[k]) < 0) Py_CLEAR(res);
  for (int k = 0; k < d->n_out; ++k)
    if (owned[k]) Py_DECREF(arrays[k]);
  return res;
}

static void drop(Door* d, PyArrayObject** arrays, int* owned, int n) {
  for (int k = 0; k < n; ++k)
    if (owned[k]) Py_DECREF(arrays[k]);
  (void)d;
}

/* With the Set s filled: the output arrays (out, or new ones), the call, the result; s goes
 * back to the pool.  An unacceptable out is NotImplemented (``strict``: a TypeError). */
static PyObject* finish(Door* d, Set* s, PyObject* out, int all, int strict) {
  PyArrayObject* arrays[d->n_out];
  int owned[d->n_out];
  int n = all ? d->n_out : 1, rc = output_arrays(d, out, all, arrays, owned);
  if (rc != 0) {
    give_set(d, s);
    if (rc < 0) return NULL;
    if (strict) {
      PyErr_SetString(PyExc_TypeError, "_door_raw: unacceptable out");
      return NULL;
    }
    Py_RETURN_NOTIMPLEMENTED;
  }
  rc = evaluate(d, s, arrays, n);
  give_set(d, s);
  if (rc < 0) {
    drop(d, arrays, owned, n);
    return NULL;
  }
  return result(d, arrays, owned, all);
}

/* The outputs of one call whose positional inputs are ``first`` (a tuple: at most the first
 * input) and named inputs the dict ``inputs`` (which also holds ``skip`` entries that are no
 * inputs: out=, threads=), when all is as the C code reads it; else NotImplemented. */
static PyObject* evaluate_call(Door* d, PyObject* first, PyObject* inputs, Py_ssize_t skip, PyObject* out, int all) {
  Py_ssize_t nfirst = PyTuple_GET_SIZE(first), named = inputs ? PyDict_GET_SIZE(inputs) - skip : 0;
  if (!d->fn || nfirst > 1 || named + nfirst != d->n_in) Py_RETURN_NOTIMPLEMENTED;
  Set* s = take_set(d);
  if (!s) return NULL;
  for (int k = 0; k < d->n_in; ++k) {
    PyObject* v;
    if (k == 0 && nfirst) {
      v = PyTuple_GET_ITEM(first, 0);
    } else if ((v = inputs ? PyDict_GetItemWithError(inputs, d->in[k].name) : NULL) == NULL) {
      give_set(d, s);
      if (PyErr_Occurred()) return NULL;
      Py_RETURN_NOTIMPLEMENTED;
    }
    if (take_input(d, d->in + k, v, s->in + d->in[k].offset)) {
      give_set(d, s);
      Py_RETURN_NOTIMPLEMENTED;
    }
  }
  return finish(d, s, out, all, 0);
}

/* _door_call(first, inputs, out, all): first a tuple (at most the first input), inputs a
 * dict by name; the outputs, or NotImplemented (see the top of the file) */
static PyObject* door_call(Door* d, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 4 || !PyTuple_CheckExact(args[0]) || !PyDict_CheckExact(args[1])) {
    PyErr_SetString(PyExc_TypeError, "_door_call(first: tuple, inputs: dict, out, all: bool)");
    return NULL;
  }
  int all = PyObject_IsTrue(args[3]);
  return all < 0 ? NULL : evaluate_call(d, args[0], args[1], 0, args[2], all);
}

static PyObject *str_out, *str_threads, *str_evaluate;

/* -- batches --------------------------------------------------------------------------------
 * The one batch runtime: every f(Q) and f.outputs(Q), whatever the function, the memory
 * layout of its inputs or the number of threads, runs here (codegen/runtime/batch.py only
 * converts and checks the Python values once, then calls run_batch).  A batch of n instances
 * is cut into shares at multiples of the lane count, each at least ``min_share`` instructions
 * of work, on at most ``threads`` threads (0: every CPU this thread may use); share k runs on
 * the (k mod c)-th of the c CPUs, starting with the caller's own: the caller runs the shares
 * of its CPU, the kept worker thread of each other CPU (take_worker) the others, all done
 * before it returns (Linux; elsewhere one thread).  Each share calls <fn>_batch_arrays; an
 * input whose instances are not already in its layout (batch first, row-major per instance:
 * Fortran order, a slice, a single instance repeated with stride 0) is gathered into a
 * share's scratch, GATHER instances at a time.  Entries are float64, or float32 for a function
 * generated in single precision (codegen/precision.py): one type for every array of a call.  An instance's result does not depend on the
 * share or block it is in (codegen/compile/vectorise.py), so every split gives the same bits. */
#define MAX_BATCH_ARRAYS 256
#define MAX_BATCH_CPUS 256
#define GATHER 256

typedef struct {
  char* data;                   /* instance 0, entry (0, 0); NULL: not passed (NULL to the entry) */
  npy_intp step, rs, cs;        /* bytes from one instance, row, column to the next */
  Py_ssize_t rows, cols, size;  /* per instance */
  Py_ssize_t itemsize;          /* 8 (float64) or 4 (float32) */
  int direct;                   /* already the entry's layout: the pointer is passed as it is */
} BatchArray;

typedef struct {
  batch_arrays fn;
  const BatchArray* arrays;     /* n_in inputs, then n_out outputs */
  int n_in, n_out;
  long long n, per_share, n_shares, first, step;
  long long refused;            /* the first instance the entry refused, or -1 */
  int failed;                   /* an entry failed, or no memory for the scratch */
} BatchJob;

/* m instances of a from instance ``start`` into dst, in the entry's layout */
static void gather(const BatchArray* a, long long start, long long m, char* dst) {
  for (long long i = 0; i < m; ++i) {
    const char* src = a->data + (start + i) * a->step;
    for (Py_ssize_t r = 0; r < a->rows; ++r)
      for (Py_ssize_t c = 0; c < a->cols; ++c, dst += a->itemsize) memcpy(dst, src + r * a->rs + c * a->cs, (size_t)a->itemsize);
  }
}

/* instances [start, stop) in blocks of ``block``; 0, or the entry's code */
static int run_range(BatchJob* j, long long start, long long stop, long long block, char* scratch) {
  const void* x[MAX_BATCH_ARRAYS];
  void* y[MAX_BATCH_ARRAYS];
  for (long long s = start; s < stop; s += block) {
    long long m = stop - s < block ? stop - s : block;
    char* g = scratch;
    for (int k = 0; k < j->n_in + j->n_out; ++k) {
      const BatchArray* a = j->arrays + k;
      void* p = !a->data ? NULL : a->direct ? (void*)(a->data + s * a->step) : g;
      if (a->data && !a->direct) {
        gather(a, s, m, g);
        g += m * a->size * a->itemsize;
      }
      if (k < j->n_in) x[k] = p; else y[k - j->n_in] = p;
    }
    int rc = j->fn(m, x, y);
    if (rc < 0) j->refused = s - 1 - rc;
    if (rc) return rc;
  }
  return 0;
}

/* shares first, first + step, … of the job, each to its end unless an instance is refused */
static void run_job(BatchJob* j) {
  Py_ssize_t gathered = 0;         /* bytes per instance */
  for (int k = 0; k < j->n_in; ++k)
    if (j->arrays[k].data && !j->arrays[k].direct) gathered += j->arrays[k].size * j->arrays[k].itemsize;
  char* scratch = gathered ? malloc((size_t)(gathered * GATHER)) : NULL;
  if (gathered && !scratch) {
    j->failed = 1;
    return;
  }
  for (long long k = j->first; k < j->n_shares; k += j->step) {
    long long start = k * j->per_share, stop = start + j->per_share < j->n ? start + j->per_share : j->n;
    if (run_range(j, start, stop, gathered ? GATHER : stop - start, scratch)) {
      j->failed |= j->refused < 0;
      break;
    }
  }
  free(scratch);
}

/* the number of shares and instances per share for n instances on at most ``threads``
 * threads (>= 1) */
static void split(long long n, long long lanes, long long per_instance, long long min_share, long long threads,
                  long long* per_share, long long* n_shares) {
  long long cap = n * per_instance / min_share;
  long long t = threads < cap ? threads : cap;
  t = t > 1 ? t : 1;
  long long groups = (n + lanes - 1) / lanes;
  *per_share = (groups + t - 1) / t * lanes;
  *n_shares = n ? (n + *per_share - 1) / *per_share : 0;
}

#include "pool.h"

/* share ``task`` of the team's jobs (cd_task_fn) */
static void job_task(void* jobs, int task) { run_job((BatchJob*)jobs + task); }

/* The shares of ``proto`` (first 0, step 1) on the CPUs ``cpus`` (pool.h's team: the calling thread and one
 * worker per other CPU).  Returns 0; -1 - i when instance i (the first) was refused; 1 when an
 * entry failed.  Without the GIL. */
static long long run_shares(const BatchJob* proto, const int* cpus, int n_cpus) {
  BatchJob jobs[MAX_BATCH_CPUS];
  int others[MAX_BATCH_CPUS];
  int width = cd_team_width(cpus, n_cpus, proto->n_shares > 1, others);
  for (int j = 0; j < width; ++j) {
    jobs[j] = *proto;
    jobs[j].first = j;
    jobs[j].step = width;
  }
  cd_team_run(job_task, jobs, others, width, proto->n_shares);
  long long refused = -1;
  int failed = 0;
  for (int j = 0; j < width; ++j) {
    if (jobs[j].refused >= 0 && (refused < 0 || jobs[j].refused < refused)) refused = jobs[j].refused;
    failed |= jobs[j].failed;
  }
  return refused >= 0 ? -1 - refused : failed;
}

/* The CPUs for ``threads`` (0: all) where a batch may be split into several shares; 0 when
 * they cannot be read (the batch then runs in one share). */
static int batch_cpus(long long n, long long per_instance, long long min_share, long long threads, int* cpus) {
  cpus[0] = 0;
  if (n * per_instance / min_share < 2 || threads == 1) return 1;
#ifdef __linux__
  return cd_pool_cpus(cpus);
#else
  return 1;
#endif
}

/* Run a batch of n instances: ``arrays`` (n_in inputs, n_out outputs) filled in.  Returns as
 * run_shares.  Under the GIL; releases it for the computation. */
static long long run_batch_arrays(batch_arrays fn, long long lanes, long long per_instance, long long min_share,
                                  long long n, const BatchArray* arrays, int n_in, int n_out, long long threads) {
  int cpus[MAX_BATCH_CPUS];
  int n_cpus = batch_cpus(n, per_instance, min_share, threads, cpus);
  BatchJob proto = {fn, arrays, n_in, n_out, n, 0, 0, 0, 1, -1, 0};
  split(n, lanes, per_instance, min_share, threads ? threads : (n_cpus > 0 ? n_cpus : 1), &proto.per_share,
        &proto.n_shares);
  if (!proto.n_shares) return 0;
  long long rc;
  Py_BEGIN_ALLOW_THREADS
  rc = run_shares(&proto, cpus, n_cpus);
  Py_END_ALLOW_THREADS
  return rc;
}

/* ``v`` (an aligned, native array of n instances of rows x cols: ndim 2 for a vector, 3 for
 * a matrix; None: not passed) of float64 (``itemsize`` 8) or float32 (4) as a BatchArray;
 * ``output``: it must be C-contiguous and writeable.  0, or -1 with a TypeError. */
static int batch_array(PyObject* v, long long n, int output, int itemsize, BatchArray* a) {
  memset(a, 0, sizeof *a);
  if (v == Py_None) return 0;
  PyArrayObject* x = (PyArrayObject*)v;
  if (!PyArray_Check(v) || PyArray_TYPE(x) != (itemsize == 4 ? NPY_FLOAT : NPY_DOUBLE) || !PyArray_ISNOTSWAPPED(x) ||
      !PyArray_ISALIGNED(x) || PyArray_NDIM(x) < 2 || PyArray_NDIM(x) > 3 || PyArray_DIMS(x)[0] != n ||
      (output && (!PyArray_ISCARRAY(x)))) {
    PyErr_Format(PyExc_TypeError, "run_batch: arrays are aligned native float%d (n, rows[, cols]), outputs "
                                  "C-contiguous and writeable", 8 * itemsize);
    return -1;
  }
  a->itemsize = itemsize;
  a->data = PyArray_BYTES(x);
  a->step = PyArray_STRIDES(x)[0];
  a->rows = PyArray_DIMS(x)[1];
  a->rs = PyArray_STRIDES(x)[1];
  a->cols = PyArray_NDIM(x) == 3 ? PyArray_DIMS(x)[2] : 1;
  a->cs = PyArray_NDIM(x) == 3 ? PyArray_STRIDES(x)[2] : 0;
  a->size = a->rows * a->cols;
  a->direct = (a->rows < 2 || a->rs == (npy_intp)(itemsize * a->cols)) && (a->cols < 2 || a->cs == itemsize) &&
              (n < 2 || a->step == (npy_intp)(itemsize * a->size));
  return 0;
}

static long long as_count(PyObject* v) {
  long long x = PyLong_AsLongLong(v);
  return x < 0 && !PyErr_Occurred() ? (PyErr_SetString(PyExc_ValueError, "run_batch: a negative count"), -1) : x;
}

/* run_batch(address, lanes, per_instance, min_share, n, inputs, outputs, threads[, itemsize]):
 * the batch entry <fn>_batch_arrays at ``address`` (checked by the loader) on n instances;
 * inputs and outputs lists of arrays (see batch_array: all float64, or all float32 where
 * ``itemsize`` is 4, the entry of a single-precision function) or None; threads 0 for every
 * CPU.  Returns 0, -1 - i when instance i was refused (the caller says why), 1 when the entry
 * failed. */
static PyObject* run_batch(PyObject* self, PyObject* args) {
  (void)self;
  PyObject *address, *lanes, *per, *min_share, *count, *inputs, *outputs, *threads;
  int itemsize = 8;
  if (!PyArg_ParseTuple(args, "OOOOOO!O!O|i", &address, &lanes, &per, &min_share, &count, &PyList_Type, &inputs,
                        &PyList_Type, &outputs, &threads, &itemsize))
    return NULL;
  if (itemsize != 8 && itemsize != 4) {
    PyErr_SetString(PyExc_ValueError, "run_batch: itemsize is 8 (float64) or 4 (float32)");
    return NULL;
  }
  unsigned long long fn = PyLong_AsUnsignedLongLong(address);
  long long l = as_count(lanes), p = as_count(per), s = as_count(min_share), n = as_count(count), t = as_count(threads);
  if (PyErr_Occurred()) return NULL;
  Py_ssize_t n_in = PyList_GET_SIZE(inputs), n_out = PyList_GET_SIZE(outputs);
  if (!fn || l < 1 || p < 1 || s < 1 || n_in + n_out > MAX_BATCH_ARRAYS) {
    PyErr_SetString(PyExc_ValueError, "run_batch: no entry, a count below 1, or too many arrays");
    return NULL;
  }
  BatchArray arrays[MAX_BATCH_ARRAYS];
  for (Py_ssize_t k = 0; k < n_in + n_out; ++k)
    if (batch_array(k < n_in ? PyList_GET_ITEM(inputs, k) : PyList_GET_ITEM(outputs, k - n_in), n, k >= n_in,
                    itemsize, arrays + k) < 0)
      return NULL;
  return PyLong_FromLongLong(run_batch_arrays((batch_arrays)(uintptr_t)fn, l, p, s, n, arrays, (int)n_in,
                                              (int)n_out, t));
}

/* shares(n, lanes, per_instance, min_share, threads): [(start, stop)] of the shares run_batch
 * makes (threads 0: every CPU) */
static PyObject* shares(PyObject* self, PyObject* args) {
  (void)self;
  long long n, lanes, per, min_share, threads, per_share, n_shares;
  int cpus[MAX_BATCH_CPUS];
  if (!PyArg_ParseTuple(args, "LLLLL", &n, &lanes, &per, &min_share, &threads)) return NULL;
  if (n < 0 || lanes < 1 || per < 1 || min_share < 1 || threads < 0) {
    PyErr_SetString(PyExc_ValueError, "shares: a negative count");
    return NULL;
  }
  int n_cpus = batch_cpus(n, per, min_share, threads, cpus);
  split(n, lanes, per, min_share, threads ? threads : (n_cpus > 0 ? n_cpus : 1), &per_share, &n_shares);
  PyObject* out = PyList_New(0);
  for (long long k = 0; out && k < n_shares; ++k) {
    long long stop = (k + 1) * per_share < n ? (k + 1) * per_share : n;
    PyObject* item = Py_BuildValue("(LL)", k * per_share, stop);
    if (!item || PyList_Append(out, item) < 0) Py_CLEAR(out);
    Py_XDECREF(item);
  }
  return out;
}

/* a C-contiguous float64 array whose data start at a multiple of 64 bytes, a view of a
 * slightly larger one (runtime/batch.aligned_empty): the batched C streams large outputs
 * with aligned vector stores */
static PyArrayObject* aligned_new(int ndim, npy_intp* dims) {
  npy_intp size = 1;
  for (int k = 0; k < ndim; ++k) size *= dims[k];
  npy_intp raw_size = size + 8;
  PyArrayObject* raw = (PyArrayObject*)PyArray_SimpleNew(1, &raw_size, NPY_DOUBLE);
  if (!raw) return NULL;
  char* data = PyArray_BYTES(raw);
  data += ((64 - (uintptr_t)data % 64) % 64);
  PyArrayObject* a = (PyArrayObject*)PyArray_NewFromDescr(&PyArray_Type, PyArray_DescrFromType(NPY_DOUBLE), ndim, dims,
                                                          NULL, data, NPY_ARRAY_CARRAY, NULL);
  if (!a || PyArray_SetBaseObject(a, (PyObject*)raw) < 0) {     /* SetBaseObject steals raw, even on failure */
    if (!a) Py_DECREF(raw);
    Py_XDECREF(a);
    return NULL;
  }
  return a;
}

/* An output of f(Q) (aligned_new's: a 64-byte aligned view of a slightly larger array), or
 * one this door returned before that nobody else holds any more, its base included: a loop
 * ``D = f(Q)`` then writes into memory already mapped, where a fresh 115 MB output each call
 * cost its page faults, three times the call itself (go1 4F3, bench/fast_routes.py).  Under
 * the GIL. */
static PyArrayObject* fresh_batch(Door* d, int ndim, npy_intp* dims) {
  for (int r = 0; r < RING; ++r) {
    PyArrayObject* a = (PyArrayObject*)d->batch_ring[r];
    if (released((PyObject*)a, ndim, dims) && (uintptr_t)PyArray_DATA(a) % 64 == 0 && PyArray_BASE(a) &&
        Py_TYPE(PyArray_BASE(a)) == &PyArray_Type && Py_REFCNT(PyArray_BASE(a)) == 1 &&
        ((PyArrayObject_fields*)PyArray_BASE(a))->weakreflist == NULL) {
      d->batch_ring[r] = NULL;
      return a;
    }
  }
  return aligned_new(ndim, dims);
}

/* f(Q) of a function of q alone, straight from tp_call: Q any aligned float64 array n x nq
 * (any order), the first output into a new array or ``out``; NotImplemented for anything
 * else, and for a refused instance (the Python path then says why). */
/* the bytes [lo, hi) that an array's elements span, whatever its strides */
static void byte_bounds(PyArrayObject* a, const char** lo, const char** hi) {
  const char* start = PyArray_BYTES(a);
  *lo = *hi = start;
  for (int k = 0; k < PyArray_NDIM(a); ++k) {
    npy_intp extent = (PyArray_DIMS(a)[k] - 1) * PyArray_STRIDES(a)[k];
    if (PyArray_DIMS(a)[k] == 0) { *hi = *lo; return; }
    if (extent < 0) *lo += extent; else *hi += extent;
  }
  *hi += PyArray_ITEMSIZE(a);
}

/* whether two arrays' spans overlap (numpy's may_share_memory test) */
static int may_overlap(PyArrayObject* a, PyArrayObject* b) {
  const char *alo, *ahi, *blo, *bhi;
  byte_bounds(a, &alo, &ahi);
  byte_bounds(b, &blo, &bhi);
  return alo < bhi && blo < ahi;
}

static PyObject* batch_call(Door* d, PyObject* first, PyObject* out, PyObject* threads) {
  const OutSpec* o = d->out;
  long long wanted = 0;                 /* threads=: 0 for every CPU */
  if (threads != Py_None) {
    int overflow = 0;
    if (!PyLong_CheckExact(threads) || (wanted = PyLong_AsLongLongAndOverflow(threads, &overflow)) < 1 || overflow)
      Py_RETURN_NOTIMPLEMENTED;         /* the Python path refuses it */
  }
  if (!PyArray_CheckExact(first)) Py_RETURN_NOTIMPLEMENTED;
  PyArrayObject* x = (PyArrayObject*)first;
  if (PyArray_TYPE(x) != NPY_DOUBLE || !PyArray_ISNOTSWAPPED(x) || !PyArray_ISALIGNED(x) || PyArray_NDIM(x) != 2 ||
      PyArray_DIMS(x)[1] != d->in[0].size || PyArray_DIMS(x)[0] < 1)
    Py_RETURN_NOTIMPLEMENTED;
  if (d->in[0].size == 1 && PyArray_DIMS(x)[0] == 1) Py_RETURN_NOTIMPLEMENTED;   /* a column q: one instance */
  npy_intp n = PyArray_DIMS(x)[0], dims[3] = {n, o->dims[0], o->ndim > 1 ? o->dims[1] : 0};
  PyArrayObject* y;
  if (out == Py_None) {
    if (!(y = fresh_batch(d, o->ndim + 1, dims))) return NULL;
  } else {
    if (!PyArray_Check(out)) Py_RETURN_NOTIMPLEMENTED;
    y = (PyArrayObject*)out;
    if (PyArray_TYPE(y) != NPY_DOUBLE || !PyArray_ISNOTSWAPPED(y) || !PyArray_ISCARRAY(y) ||
        PyArray_NDIM(y) != o->ndim + 1)
      Py_RETURN_NOTIMPLEMENTED;
    for (int k = 0; k <= o->ndim; ++k)
      if (PyArray_DIMS(y)[k] != dims[k]) Py_RETURN_NOTIMPLEMENTED;
    Py_INCREF(y);
  }
  /* an out over the input's memory would be written before all of it is read: the Python
     path (runtime/batch.py's evaluate) copies the input first */
  if (PyArray_Check(first) && may_overlap((PyArrayObject*)first, y)) {
    Py_DECREF(y);
    Py_RETURN_NOTIMPLEMENTED;
  }
  BatchArray arrays[MAX_BATCH_ARRAYS];
  batch_array(first, n, 0, 8, arrays);
  batch_array((PyObject*)y, n, 1, 8, arrays + 1);
  for (int k = 1; k < d->n_out; ++k) memset(arrays + 1 + k, 0, sizeof *arrays);     /* not written */
  if (run_batch_arrays(d->batch_fn, d->batch_lanes, d->batch_per_instance, d->batch_min_share, n, arrays, 1,
                       d->n_out, wanted)) {
    Py_DECREF(y);
    Py_RETURN_NOTIMPLEMENTED;
  }
  if (out == Py_None && PyArray_NBYTES(y) <= BATCH_KEEP_BYTES) keep_in(d->batch_ring, &d->batch_next, y);
  return (PyObject*)y;
}

/* _door_bind_batch(address, lanes, per_instance, min_share): f(Q) of this function of q alone
 * runs <fn>_batch_arrays at ``address`` (checked by the loader) from tp_call */
static PyObject* door_bind_batch(Door* d, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 4) {
    PyErr_SetString(PyExc_TypeError, "_door_bind_batch(address, lanes, per_instance, min_share)");
    return NULL;
  }
  unsigned long long address = PyLong_AsUnsignedLongLong(args[0]);
  long long lanes = PyLong_AsLongLong(args[1]), per = PyLong_AsLongLong(args[2]), min_share = PyLong_AsLongLong(args[3]);
  if (PyErr_Occurred()) return NULL;
  if (!d->fn || d->n_in != 1 || d->in[0].vector == 0 || d->n_out + 1 > MAX_BATCH_ARRAYS || !address || lanes < 1 ||
      per < 1 || min_share < 1) {
    PyErr_SetString(PyExc_ValueError, "_door_bind_batch: a bound door of one vector input");
    return NULL;
  }
  d->batch_fn = (batch_arrays)(uintptr_t)address;
  d->batch_lanes = lanes;
  d->batch_per_instance = per;
  d->batch_min_share = min_share;
  Py_RETURN_NONE;
}

/* f(q, **inputs, out=None, threads=None): the first output.  What the door does not take
 * goes to the instance's _evaluate(first, inputs, threads, out, True) (runtime/loader.py). */
static PyObject* door_tp_call(Door* d, PyObject* args, PyObject* kwargs) {
  PyObject *out = Py_None, *threads = Py_None, *x;
  Py_ssize_t skip = 0;
  if (kwargs && PyDict_GET_SIZE(kwargs)) {
    if ((x = PyDict_GetItemWithError(kwargs, str_out)) != NULL) { out = x; skip++; }
    else if (PyErr_Occurred()) return NULL;
    if ((x = PyDict_GetItemWithError(kwargs, str_threads)) != NULL) { threads = x; skip++; }
    else if (PyErr_Occurred()) return NULL;
  }
  if (d->batch_fn && PyTuple_GET_SIZE(args) == 1 && (!kwargs || PyDict_GET_SIZE(kwargs) == skip) &&
      PyArray_Check(PyTuple_GET_ITEM(args, 0)) && PyArray_NDIM((PyArrayObject*)PyTuple_GET_ITEM(args, 0)) == 2) {
    PyObject* res = batch_call(d, PyTuple_GET_ITEM(args, 0), out, threads);
    if (res != Py_NotImplemented) return res;
    Py_DECREF(res);
  }
  if (threads == Py_None) {
    PyObject* res = evaluate_call(d, args, kwargs, skip, out, 0);
    if (res != Py_NotImplemented) return res;
    Py_DECREF(res);
  }
  PyObject* inputs = kwargs ? PyDict_Copy(kwargs) : PyDict_New();
  if (!inputs) return NULL;
  PyObject* special[2] = {str_out, str_threads};
  for (int k = 0; skip && k < 2; ++k) {
    int has = PyDict_Contains(inputs, special[k]);
    if (has < 0 || (has && PyDict_DelItem(inputs, special[k]) < 0)) {
      Py_DECREF(inputs);
      return NULL;
    }
  }
  PyObject* res = PyObject_CallMethodObjArgs((PyObject*)d, str_evaluate, args, inputs, threads, out, Py_True, NULL);
  Py_DECREF(inputs);
  return res;
}

/* raw(values, out, all): values the list of inputs.as_input's arrays in manifest order; out
 * checked by the caller (an unacceptable one is a TypeError here) */
static PyObject* door_raw(Door* d, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 3 || !PyList_CheckExact(args[0]) || PyList_GET_SIZE(args[0]) != d->n_in) {
    PyErr_SetString(PyExc_TypeError, "_door_raw(values: list of every input, out, all: bool)");
    return NULL;
  }
  if (!d->fn) {
    PyErr_SetString(PyExc_TypeError, "_door_raw on a door bound to no function");
    return NULL;
  }
  int all = PyObject_IsTrue(args[2]);
  Set* s = take_set(d);
  if (!s) return NULL;
  for (int k = 0; k < d->n_in; ++k)
    if (take_raw(d->in + k, PyList_GET_ITEM(args[0], k), s->in + d->in[k].offset)) {
      give_set(d, s);
      return NULL;
    }
  return finish(d, s, args[1], all, 1);
}

/* -- the type ------------------------------------------------------------------------------- */
static void unbind(Door* d);

static void door_dealloc(Door* d) {
  unbind(d);
  Py_TYPE(d)->tp_free((PyObject*)d);
}

static int parse_inputs(Door* d, PyObject* specs) {
  d->n_in = (int)PyList_GET_SIZE(specs);
  d->in = PyMem_Calloc((size_t)d->n_in + 1, sizeof(InSpec));
  if (!d->in) return -1;
  Py_ssize_t offset = 0;
  for (int k = 0; k < d->n_in; ++k) {
    InSpec* s = d->in + k;
    PyObject* name;
    if (!PyArg_ParseTuple(PyList_GET_ITEM(specs, k), "Unnpi", &name, &s->rows, &s->cols, &s->vector, &s->check))
      return -1;
    if (s->rows < 0 || s->cols < 0) {
      PyErr_SetString(PyExc_ValueError, "negative input size");
      return -1;
    }
    Py_INCREF(name);
    PyUnicode_InternInPlace(&name);
    s->name = name;
    s->size = s->rows * s->cols;
    s->offset = offset;
    offset += (s->size + 7) & ~(Py_ssize_t)7;
  }
  d->in_total = offset;
  return 0;
}

static int parse_outputs(Door* d, PyObject* specs) {
  d->n_out = (int)PyList_GET_SIZE(specs);
  d->out = PyMem_Calloc((size_t)d->n_out + 1, sizeof(OutSpec));
  if (!d->out) return -1;
  Py_ssize_t offset = 0;
  for (int k = 0; k < d->n_out; ++k) {
    OutSpec* o = d->out + k;
    PyObject *name, *shape;
    if (!PyArg_ParseTuple(PyList_GET_ITEM(specs, k), "UO!", &name, &PyTuple_Type, &shape)) return -1;
    o->ndim = (int)PyTuple_GET_SIZE(shape);
    if (o->ndim < 1 || o->ndim > 2) {
      PyErr_SetString(PyExc_ValueError, "outputs have 1 or 2 dimensions");
      return -1;
    }
    for (int j = 0; j < o->ndim; ++j) {
      o->dims[j] = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, j));
      if (o->dims[j] < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "negative output size");
        return -1;
      }
    }
    o->rows = o->dims[0];
    o->cols = o->ndim == 2 ? o->dims[1] : 1;
    o->size = o->rows * o->cols;
    Py_INCREF(name);
    PyUnicode_InternInPlace(&name);
    o->name = name;
    o->offset = offset;
    offset += (o->size + 7) & ~(Py_ssize_t)7;
  }
  d->out_total = offset;
  return 0;
}

/* Door.__init__(address, keep, error, label, inputs, outputs, q_index, units, unit_tol, work,
 * release_gil) binds a Door (or an instance of a subclass: CompiledFunction) to a function:
 *   inputs: [(name, rows, cols, vector, check)], outputs: [(name, shape tuple)],
 *   units: [(start, length)] in q, work: (sz_arg, sz_res, sz_iw, sz_w).
 * An unbound one (never initialised, or whose binding failed) hands every call on. */
static void unbind(Door* d) {
  while (d->pool) {
    Set* s = d->pool;
    d->pool = s->next;
    free(s);
  }
  d->pooled = 0;
  for (int k = 0; d->in && k < d->n_in; ++k) Py_XDECREF(d->in[k].name);
  for (int k = 0; d->out && k < d->n_out; ++k) {
    Py_XDECREF(d->out[k].name);
    for (int r = 0; r < RING; ++r) Py_XDECREF(d->out[k].ring[r]);
  }
  for (int r = 0; r < RING; ++r) Py_CLEAR(d->batch_ring[r]);
  PyMem_Free(d->in);
  PyMem_Free(d->out);
  PyMem_Free(d->units);
  d->in = NULL;
  d->out = NULL;
  d->units = NULL;
  d->n_in = d->n_out = d->n_units = 0;
  Py_CLEAR(d->keep);
  Py_CLEAR(d->error);
  Py_CLEAR(d->label);
  d->fn = NULL;
  d->batch_fn = NULL;
}

static int door_init(Door* d, PyObject* args, PyObject* kwds) {
  unsigned long long address;
  PyObject *keep, *error, *label, *inputs, *outputs, *units;
  int q_index, release_gil;
  double tol;
  Py_ssize_t sz[4];
  if (kwds && PyDict_Size(kwds)) {
    PyErr_SetString(PyExc_TypeError, "Door takes positional arguments");
    return -1;
  }
  if (!PyArg_ParseTuple(args, "KOOUO!O!iO!d(nnnn)p", &address, &keep, &error, &label, &PyList_Type, &inputs,
                        &PyList_Type, &outputs, &q_index, &PyList_Type, &units, &tol, &sz[0], &sz[1], &sz[2], &sz[3],
                        &release_gil))
    return -1;
  if (!address || !PyType_Check(error) || !PyType_IsSubtype((PyTypeObject*)error, (PyTypeObject*)PyExc_Exception)) {
    PyErr_SetString(PyExc_ValueError, "Door: a function address and an exception class are needed");
    return -1;
  }
  unbind(d);
  Py_INCREF(keep); d->keep = keep;
  Py_INCREF(error); d->error = error;
  Py_INCREF(label); d->label = label;
  d->release_gil = release_gil;
  d->unit_tol = tol;
  if (parse_inputs(d, inputs) < 0 || parse_outputs(d, outputs) < 0) goto fail;
  if (d->n_out < 1 || sz[0] < d->n_in || sz[1] < d->n_out || sz[2] < 0 || sz[3] < 0) {
    PyErr_SetString(PyExc_ValueError, "Door: no output, or work sizes below the numbers of inputs and outputs");
    goto fail;
  }
  d->sz_arg = sz[0]; d->sz_res = sz[1]; d->sz_iw = sz[2]; d->sz_w = sz[3];
  d->q_index = q_index;
  d->n_units = (int)PyList_GET_SIZE(units);
  if (d->n_units) {
    if (q_index < 0 || q_index >= d->n_in) {
      PyErr_SetString(PyExc_ValueError, "Door: unit blocks without q");
      goto fail;
    }
    d->units = PyMem_Calloc(2 * (size_t)d->n_units, sizeof(Py_ssize_t));
    if (!d->units) goto fail;
    for (int u = 0; u < d->n_units; ++u) {
      Py_ssize_t start, len;
      if (!PyArg_ParseTuple(PyList_GET_ITEM(units, u), "nn", &start, &len)) goto fail;
      if (start < 0 || len < 1 || start + len > d->in[q_index].size) {
        PyErr_SetString(PyExc_ValueError, "Door: a unit block outside q");
        goto fail;
      }
      d->units[2 * u] = start;
      d->units[2 * u + 1] = len;
    }
  }
  d->fn = (casadi_fn)(uintptr_t)address;
  return 0;
fail:
  unbind(d);
  return -1;
}

static PyObject* door_bound(Door* d, void* closure) {
  (void)closure;
  return PyBool_FromLong(d->fn != NULL);
}

static PyGetSetDef door_getset[] = {
  {"_door_bound", (getter)door_bound, NULL, "whether calls go through the door", NULL},
  {NULL, NULL, NULL, NULL, NULL}};

static PyMethodDef door_methods[] = {
  {"_door_call", (PyCFunction)(void (*)(void))door_call, METH_FASTCALL,
   "_door_call(first, inputs, out, all): the outputs for inputs already as the C code reads them, else NotImplemented"},
  {"_door_bind_batch", (PyCFunction)(void (*)(void))door_bind_batch, METH_FASTCALL,
   "_door_bind_batch(address, lanes, per_instance, min_share): batches of q call <fn>_batch at address from here"},
  {"_door_raw", (PyCFunction)(void (*)(void))door_raw, METH_FASTCALL,
   "_door_raw(values, out, all): the outputs for inputs.as_input's arrays (every input, manifest order)"},
  {NULL, NULL, 0, NULL}};

static PyTypeObject DoorType = {
  PyVarObject_HEAD_INIT(NULL, 0)
  .tp_name = "casadi_delassus_door.Door",
  .tp_basicsize = sizeof(Door),
  .tp_dealloc = (destructor)door_dealloc,
  .tp_call = (ternaryfunc)door_tp_call,
  .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
  .tp_doc = "The call path of one generated function, the base of CompiledFunction (runtime/door.py).",
  .tp_methods = door_methods,
  .tp_getset = door_getset,
  .tp_init = (initproc)door_init,
  .tp_new = PyType_GenericNew,
};

static PyMethodDef module_methods[] = {
  {"run_batch", run_batch, METH_VARARGS,
   "run_batch(address, lanes, per_instance, min_share, n, inputs, outputs, threads): a batch on every core"},
  {"shares", shares, METH_VARARGS, "shares(n, lanes, per_instance, min_share, threads): how run_batch splits n"},
  {NULL, NULL, 0, NULL}};

static struct PyModuleDef door_module = {PyModuleDef_HEAD_INIT, "casadi_delassus_door", NULL, -1, module_methods};

PyMODINIT_FUNC PyInit_casadi_delassus_door(void) {
  import_array();
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  has_avx = __builtin_cpu_supports("avx");
#endif
  str_out = PyUnicode_InternFromString("out");
  str_threads = PyUnicode_InternFromString("threads");
  str_evaluate = PyUnicode_InternFromString("_evaluate");
  if (!str_out || !str_threads || !str_evaluate || PyType_Ready(&DoorType) < 0) return NULL;
  PyObject* m = PyModule_Create(&door_module);
  if (!m) return NULL;
  Py_INCREF(&DoorType);
  if (PyModule_AddObject(m, "Door", (PyObject*)&DoorType) < 0) {
    Py_DECREF(&DoorType);
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
