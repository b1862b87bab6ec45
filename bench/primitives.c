/* bench/primitives.c: what this machine's CPU charges for the operations a lock's fast path
 * is made of, one thread, each in a loop: a locked add, an xchg, a lock cmpxchg, a seq_cst
 * store, a plain store right before a locked add, a release store, an mfence, rdtsc and
 * clock_gettime(CLOCK_MONOTONIC). Each line: "NAME NS" (ns per operation, the median of 21
 * slices timed by the thread's CPU clock, the loop's own cost, measured by an empty loop,
 * taken off). bench/lockprof_cost.py prints them beside its table, so that a reader on
 * another CPU sees why its ratios differ from the docs'.
 *
 *   primitives [ITERATIONS]      (default 2000000 per slice)
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define HAVE_X86 1
#else
#define HAVE_X86 0
#endif

#define SLICES 21

static volatile uint64_t word;  /* what every operation works on: one line, one thread */
static volatile uint64_t other; /* the plain store's target, another line */
static volatile uint64_t sink;

static double cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* Each body is one operation; the loop keeps it from being hoisted (volatile, asm). */
#define BODY_empty() __asm__ volatile("" ::: "memory")
#define BODY_locked_add() __atomic_fetch_add(&word, 1, __ATOMIC_RELAXED)
#define BODY_xchg() (void)__atomic_exchange_n(&word, i, __ATOMIC_ACQ_REL)
#define BODY_cmpxchg()                                                                          \
  do {                                                                                          \
    uint64_t e = word;                                                                          \
    (void)__atomic_compare_exchange_n(&word, &e, e + 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED); \
  } while (0)
#define BODY_seq_cst_store() __atomic_store_n(&word, i, __ATOMIC_SEQ_CST)
#define BODY_store_then_locked_add()                \
  do {                                              \
    other = i;                                      \
    __atomic_fetch_add(&word, 1, __ATOMIC_RELAXED); \
  } while (0)
#define BODY_release_store() __atomic_store_n(&word, i, __ATOMIC_RELEASE)
#define BODY_fence() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#if HAVE_X86
#define BODY_rdtsc() sink = __rdtsc()
#else
#define BODY_rdtsc() BODY_empty()
#endif
#define BODY_clock_gettime()             \
  do {                                   \
    struct timespec ts;                  \
    clock_gettime(CLOCK_MONOTONIC, &ts); \
    sink = (uint64_t)ts.tv_nsec;         \
  } while (0)

#define MEASURE(name)                        \
  static double measure_##name(uint64_t n) { \
    double best[SLICES];                     \
    for (int s = 0; s < SLICES; ++s) {       \
      const double t0 = cpu_ns();            \
      for (uint64_t i = 0; i < n; ++i) {     \
        BODY_##name();                       \
        __asm__ volatile("" ::: "memory");   \
      }                                      \
      best[s] = (cpu_ns() - t0) / (double)n; \
    }                                        \
    return median(best);                     \
  }

static int cmp(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double median(double* v) {
  qsort(v, SLICES, sizeof v[0], cmp);
  return v[SLICES / 2];
}

MEASURE(empty)
MEASURE(locked_add)
MEASURE(xchg)
MEASURE(cmpxchg)
MEASURE(seq_cst_store)
MEASURE(store_then_locked_add)
MEASURE(release_store)
MEASURE(fence)
MEASURE(rdtsc)
MEASURE(clock_gettime)

int main(int argc, char** argv) {
  const long n = argc > 1 ? strtol(argv[1], NULL, 10) : 2000000;
  if (n < 1000 || n > 1000000000) {
    fprintf(stderr, "primitives: ITERATIONS must be 1000..1000000000\n");
    return 2;
  }
  const double loop = measure_empty((uint64_t)n);
  struct {
    const char* name;
    double (*fn)(uint64_t);
  } ops[] = {
      {"locked_add", measure_locked_add},
      {"xchg", measure_xchg},
      {"lock_cmpxchg", measure_cmpxchg},
      {"seq_cst_store", measure_seq_cst_store},
      {"store_then_locked_add", measure_store_then_locked_add},
      {"release_store", measure_release_store},
      {"mfence", measure_fence},
      {"rdtsc", measure_rdtsc},
      {"clock_gettime", measure_clock_gettime},
  };
  for (size_t k = 0; k < sizeof ops / sizeof ops[0]; ++k) {
    if (!HAVE_X86 && ops[k].fn == measure_rdtsc) continue;
    const double ns = ops[k].fn((uint64_t)n) - loop;
    printf("%s %.2f\n", ops[k].name, ns > 0 ? ns : 0.0);
  }
  return 0;
}
