/* casadi_delassus runtime/pool.h: the one thread pool of the package's C (issue 35).  runtime/door.c includes it
 * (batches of generated functions) and the contact step and rollout emit it (codegen/contact_step.py puts its text in
 * templates/step.c.j2), so that every parallel loop runs on the same pinned workers.
 *
 * One worker thread per CPU, bound to it, started on first use and kept: waking one costs a few µs where starting a
 * thread cost ~30 (this VM).  A worker's ``busy`` is held by the caller that uses it (another caller meanwhile starts a
 * thread of its own, on that CPU); ``task`` under ``m``: set by the caller, cleared by the worker when done, ``cv``
 * signalling both ways.  Off Linux (no CPU sets) a team is the calling thread alone.  The includer defines _GNU_SOURCE
 * (Python.h does) before its first system header. */
#include <stdlib.h>
#include <string.h>

#define CD_POOL_MAX 256
typedef void cd_task_fn(void* ctx, int task);     /* runs task ``task`` (0 .. width - 1) of a team */

#ifdef __linux__
#include <pthread.h>
#include <sched.h>

/* the CPUs this thread may use, ascending (at most CD_POOL_MAX); 0 if unknown */
static int cd_pool_cpus(int* cpus) {
  cpu_set_t set;
  int n = 0;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
  for (int c = 0; c < CPU_SETSIZE && n < CD_POOL_MAX; ++c)
    if (CPU_ISSET(c, &set)) cpus[n++] = c;
  return n;
}

typedef struct {
  pthread_mutex_t busy, m;
  pthread_cond_t cv;
  cd_task_fn* fn;               /* NULL: idle */
  void* ctx;
  int task;
} cd_worker;
static cd_worker* cd_workers[CPU_SETSIZE];
static pthread_mutex_t cd_workers_lock = PTHREAD_MUTEX_INITIALIZER;

static void* cd_worker_main(void* p) {
  cd_worker* w = (cd_worker*)p;
  pthread_mutex_lock(&w->m);
  for (;;) {
    while (!w->fn) pthread_cond_wait(&w->cv, &w->m);
    cd_task_fn* fn = w->fn;
    pthread_mutex_unlock(&w->m);
    fn(w->ctx, w->task);
    pthread_mutex_lock(&w->m);
    w->fn = NULL;
    pthread_cond_broadcast(&w->cv);
  }
  return NULL;
}

/* a forked child has the table but not the threads: it starts its own */
static void cd_forget_workers(void) {
  memset(cd_workers, 0, sizeof cd_workers);
  pthread_mutex_init(&cd_workers_lock, NULL);
}

/* the worker of ``cpu``, reserved for the caller (its ``busy`` held), or NULL */
static cd_worker* cd_take_worker(int cpu) {
  static int registered;
  cd_worker* w;
  pthread_mutex_lock(&cd_workers_lock);
  if (!registered) registered = pthread_atfork(NULL, NULL, cd_forget_workers) == 0 ? 1 : -1;
  if (!(w = cd_workers[cpu]) && registered == 1 && (w = calloc(1, sizeof *w))) {
    pthread_attr_t attr;
    pthread_t tid;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_mutex_init(&w->busy, NULL);
    pthread_mutex_init(&w->m, NULL);
    pthread_cond_init(&w->cv, NULL);
    int ok = pthread_attr_init(&attr) == 0;
    if (ok) {
      pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
      ok = pthread_attr_setaffinity_np(&attr, sizeof set, &set) == 0 && pthread_create(&tid, &attr, cd_worker_main, w) == 0;
      pthread_attr_destroy(&attr);
    }
    if (ok) {
      cd_workers[cpu] = w;
    } else {
      free(w);
      w = NULL;
    }
  }
  pthread_mutex_unlock(&cd_workers_lock);
  return w && pthread_mutex_trylock(&w->busy) == 0 ? w : NULL;
}

typedef struct { cd_task_fn* fn; void* ctx; int task; } cd_own_task;

static void* cd_own_main(void* p) {
  cd_own_task* t = (cd_own_task*)p;
  t->fn(t->ctx, t->task);
  return NULL;
}
#endif

/* The width of a team on ``cpus`` (n_cpus of them; 0: unknown) when ``split`` (more than one share): the calling
 * thread and one worker per other CPU; ``others`` receives those CPUs.  1 off Linux. */
static int cd_team_width(const int* cpus, int n_cpus, int split, int* others) {
  int width = 1;
#ifdef __linux__
  int here = sched_getcpu(), found = 0;
  if (split && n_cpus > 1) {
    for (int c = 0; c < n_cpus; ++c) found |= cpus[c] == here;
    if (!found) here = cpus[0];
    for (int c = 0; c < n_cpus; ++c)
      if (cpus[c] != here) others[width++ - 1] = cpus[c];
  }
#else
  (void)cpus;
  (void)n_cpus;
  (void)split;
  (void)others;
#endif
  return width;
}

/* Tasks 0 .. min(width, tasks) - 1 of fn(ctx, ·): task 0 on the calling thread, task j on the pooled worker of
 * others[j - 1] (busy with another caller: a thread of our own on that CPU, unbound where binding is refused; none
 * starts: the caller runs it after its own).  Returns when every task has. */
static void cd_team_run(cd_task_fn* fn, void* ctx, const int* others, int width, long long tasks) {
  int n = tasks < width ? (int)tasks : width;
#ifdef __linux__
  pthread_t tid[CD_POOL_MAX];
  cd_worker* pooled[CD_POOL_MAX] = {NULL};
  cd_own_task own[CD_POOL_MAX];
  int started[CD_POOL_MAX] = {0};
  for (int j = 1; j < n; ++j) {
    if ((pooled[j] = cd_take_worker(others[j - 1]))) {
      pthread_mutex_lock(&pooled[j]->m);
      pooled[j]->ctx = ctx;
      pooled[j]->task = j;
      pooled[j]->fn = fn;
      pthread_cond_broadcast(&pooled[j]->cv);
      pthread_mutex_unlock(&pooled[j]->m);
      continue;
    }
    pthread_attr_t attr;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(others[j - 1], &set);
    own[j].fn = fn;
    own[j].ctx = ctx;
    own[j].task = j;
    if (pthread_attr_init(&attr) != 0) continue;
    pthread_attr_setaffinity_np(&attr, sizeof set, &set);
    started[j] = pthread_create(&tid[j], &attr, cd_own_main, &own[j]) == 0;
    if (!started[j]) started[j] = pthread_create(&tid[j], NULL, cd_own_main, &own[j]) == 0;
    pthread_attr_destroy(&attr);
  }
#else
  (void)others;
#endif
  fn(ctx, 0);
  for (int j = 1; j < n; ++j) {
#ifdef __linux__
    if (pooled[j]) {
      pthread_mutex_lock(&pooled[j]->m);
      while (pooled[j]->fn) pthread_cond_wait(&pooled[j]->cv, &pooled[j]->m);
      pthread_mutex_unlock(&pooled[j]->m);
      pthread_mutex_unlock(&pooled[j]->busy);
      continue;
    }
    if (started[j]) {
      pthread_join(tid[j], NULL);
      continue;
    }
#endif
    fn(ctx, j);
  }
}

/* share(ctx, begin, end) over items 0..n-1 split into consecutive shares, one per thread of a team of at most
 * `threads` (the caller and the pinned workers of the pool).  The generated contact step, its rollout and the MuJoCo
 * rollout split their work by it; door.c splits its own way (cd_team_run), hence ``unused`` there. */
typedef void cd_share_fn(const void *ctx, long begin, long end);
struct cd_split_job { cd_share_fn *run; const void *ctx; long n; int width; };

/* share t of width of a cd_split (cd_task_fn) */
static void cd_split_task(void *p, int t) {
  const struct cd_split_job *j = p;
  j->run(j->ctx, j->n * t / j->width, j->n * (t + 1) / j->width);
}

__attribute__((unused)) static void cd_split(int n, int threads, cd_share_fn *run, const void *ctx) {
  int cpus[CD_POOL_MAX], others[CD_POOL_MAX];
  int n_cpus = threads > 1 && n > 1 ? cd_pool_cpus(cpus) : 0;
  if (n_cpus > threads) n_cpus = threads;
  if (n_cpus > n) n_cpus = n;
  struct cd_split_job j = {run, ctx, n, cd_team_width(cpus, n_cpus, 1, others)};
  cd_team_run(cd_split_task, &j, others, j.width, j.width);
}
