// What the lock preload costs one thread, uncontended: PAIRS lock+unlock pairs of a pthread
// mutex, then of a pthread rwlock's read side. Run plain and under liblockprof.so in each of
// its modes by bench/lockprof_cost.py; C, so that nothing but the preload stands between the
// calls and glibc.
//
// Timed by the thread's CPU clock (CLOCK_THREAD_CPUTIME_ID), not the wall clock: on a loaded
// machine a wall-clock run mostly measures the other programs' time slices. Each loop runs
// in kSlices slices; the result is the median slice's time per pair, so a slice that a
// preemption's cache misses or a stolen virtual CPU still slowed moves it little.
//
// A second thread is started first and parks for the whole run: a program that locks has
// threads, and in a process with one thread glibc (2.34 on) takes and releases a private
// mutex with plain stores, a path no program that needs the lock ever takes.
//
//   lockprof_cost [PAIRS]   prints: mutex_ns=N rwlock_ns=N (per pair)
#include <pthread.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { kSlices = 21 };

static double cpu_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int by_value(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double median(double* v, int n) {
  qsort(v, (size_t)n, sizeof v[0], by_value);
  return v[n / 2];
}

// `each` lock+unlock pairs of one lock, its calls made directly, as a program makes them.
static void mutex_pairs(void* m, long each) {
  for (long i = 0; i < each; i++) {
    pthread_mutex_lock(m);
    pthread_mutex_unlock(m);
  }
}

static void rwlock_pairs(void* rw, long each) {
  for (long i = 0; i < each; i++) {
    pthread_rwlock_rdlock(rw);
    pthread_rwlock_unlock(rw);
  }
}

// The median slice's time per pair, `pairs` pairs made by `loop` on `lock` in kSlices slices:
// the loop is called once a slice, so the call adds nothing measurable to a pair.
static double ns_per_pair(void (*loop)(void*, long), void* lock, long pairs) {
  double slice[kSlices];
  const long each = pairs / kSlices > 0 ? pairs / kSlices : 1;
  for (int s = 0; s < kSlices; s++) {
    const double t0 = cpu_ns();
    loop(lock, each);
    slice[s] = (cpu_ns() - t0) / (double)each;
  }
  return median(slice, kSlices);
}

static void* park(void* arg) {
  (void)arg;
  for (;;) pause();
  return NULL;
}

int main(int argc, char** argv) {
  char* end = NULL;
  long pairs = argc > 1 ? strtol(argv[1], &end, 10) : 5000000;
  if (argc > 2 || (argc > 1 && (*end != '\0' || pairs < 1 || pairs > 1000000000))) {
    fprintf(stderr, "lockprof_cost: PAIRS must be a whole number from 1 to 1000000000\n");
    return 2;
  }
  pthread_t parked;
  if (pthread_create(&parked, NULL, park, NULL) != 0) {
    fprintf(stderr, "lockprof_cost: could not start the parked thread\n");
    return 1;
  }
  pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
  pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
  // A first pair each, outside the clock: the preload reads its configuration then.
  mutex_pairs(&m, 1);
  rwlock_pairs(&rw, 1);
  const double mutex_ns = ns_per_pair(mutex_pairs, &m, pairs);
  const double rwlock_ns = ns_per_pair(rwlock_pairs, &rw, pairs);
  printf("mutex_ns=%.1f rwlock_ns=%.1f\n", mutex_ns, rwlock_ns);
  return 0;
}
