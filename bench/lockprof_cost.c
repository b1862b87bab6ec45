// What the lock preload costs one thread, uncontended: PAIRS lock+unlock pairs of a pthread
// mutex, then of a pthread rwlock's read side, timed by CLOCK_MONOTONIC. Run plain and under
// liblockprof.so in each of its modes by bench/lockprof_cost.py; C, so that nothing but the
// preload stands between the calls and glibc.
//
//   lockprof_cost [PAIRS]   prints: mutex_ns=N rwlock_ns=N (per pair)
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

int main(int argc, char** argv) {
  char* end = NULL;
  long pairs = argc > 1 ? strtol(argv[1], &end, 10) : 5000000;
  if (argc > 2 || (argc > 1 && (*end != '\0' || pairs < 1 || pairs > 1000000000))) {
    fprintf(stderr, "lockprof_cost: PAIRS must be a whole number from 1 to 1000000000\n");
    return 2;
  }
  pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
  pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
  // A first pair each, outside the clock: the preload reads its configuration then.
  pthread_mutex_lock(&m);
  pthread_mutex_unlock(&m);
  pthread_rwlock_rdlock(&rw);
  pthread_rwlock_unlock(&rw);
  double t0 = now_ns();
  for (long i = 0; i < pairs; i++) {
    pthread_mutex_lock(&m);
    pthread_mutex_unlock(&m);
  }
  double t1 = now_ns();
  for (long i = 0; i < pairs; i++) {
    pthread_rwlock_rdlock(&rw);
    pthread_rwlock_unlock(&rw);
  }
  double t2 = now_ns();
  printf("mutex_ns=%.1f rwlock_ns=%.1f\n", (t1 - t0) / (double)pairs, (t2 - t1) / (double)pairs);
  return 0;
}
