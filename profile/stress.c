/* A test program of liblockprof (analysis/tests/test_profile.py runs it plain, profiled and
 * with every swap lock): each section checks what a lock must guarantee, whoever provides
 * it. Prints one line per section and exits 0 when every check held, 1 otherwise.
 *
 *   stress [THREADS [ITERATIONS]]     default 4 threads, 20000 iterations each */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int threads = 4, iters = 20000, failed;

static void check(int ok, const char *what) {
  printf("%s %s\n", ok ? "ok  " : "FAIL", what);
  if (!ok) failed = 1;
}

static struct timespec in_ns(long ns) { /* CLOCK_REALTIME, ns from now */
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  t.tv_nsec += ns;
  t.tv_sec += t.tv_nsec / 1000000000;
  t.tv_nsec %= 1000000000;
  return t;
}

static void run(void *(*fn)(void *)) {
  pthread_t t[64];
  for (long i = 0; i < threads; i++) pthread_create(&t[i], NULL, fn, (void *)i);
  for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
}

/* Mutual exclusion: a plain counter, one global mutex and eight by index, nested; a quarter
 * of the outer acquisitions timed (a far deadline: they must all succeed, after waiting). */
static pthread_mutex_t one = PTHREAD_MUTEX_INITIALIZER, eight[8];
static long counter, slots[8], timed_failed;

static void *mutex_worker(void *arg) {
  unsigned seed = (unsigned)(long)arg;
  for (int i = 0; i < iters; i++) {
    int k = rand_r(&seed) % 8;
    struct timespec far = in_ns(10000000000L);
    if (i % 4 == 0 ? pthread_mutex_timedlock(&one, &far) != 0 : pthread_mutex_lock(&one) != 0) {
      __atomic_add_fetch(&timed_failed, 1, __ATOMIC_RELAXED);
      continue;
    }
    pthread_mutex_lock(&eight[k]);
    counter++;
    pthread_mutex_unlock(&one); /* out of order on purpose */
    slots[k]++;
    pthread_mutex_unlock(&eight[k]);
  }
  return NULL;
}

static void mutexes(void) {
  for (int k = 0; k < 8; k++) pthread_mutex_init(&eight[k], NULL);
  run(mutex_worker);
  long sum = 0;
  for (int k = 0; k < 8; k++) sum += slots[k];
  check(counter == (long)threads * iters && sum == counter && timed_failed == 0,
        "mutex: no lost update");
}

/* A known contended call path, for the profiler's stacks (--stacks): every thread takes `hot`
 * through contended_worker -> contended_outer -> contended_inner and holds it 1 ms asleep,
 * so the others wait there far longer than anywhere else in this program. Neither function
 * is inlined or cloned, and neither call is a tail call, so each keeps a frame of its own. */
#define HOT_ROUNDS 25
static pthread_mutex_t hot = PTHREAD_MUTEX_INITIALIZER;
static long hot_count;

__attribute__((noinline, noclone)) static void contended_inner(void) {
  pthread_mutex_lock(&hot);
  struct timespec t = {0, 1000000};
  nanosleep(&t, NULL);
  hot_count++;
  pthread_mutex_unlock(&hot);
}

__attribute__((noinline, noclone)) static void contended_outer(void) {
  contended_inner();
  __asm__ volatile("" ::: "memory"); /* after the call: not a tail call */
}

static void *contended_worker(void *arg) {
  (void)arg;
  for (int i = 0; i < HOT_ROUNDS; i++) contended_outer();
  return NULL;
}

static void contended(void) {
  run(contended_worker);
  check(hot_count == (long)threads * HOT_ROUNDS, "mutex: the known contended path");
}

/* Readers never see a writer half done; try and timed locks keep their promises. */
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static long a, b, torn, writes, refused;

/* Unlocks a lock this thread holds: a refusal (EPERM, "not locked") is a failure here, not
 * only later as a writer that waits for ever on a reader whose exit was not counted. */
static void rw_unlock(pthread_rwlock_t *l) {
  if (pthread_rwlock_unlock(l) != 0) __atomic_add_fetch(&refused, 1, __ATOMIC_RELAXED);
}

static void *rw_worker(void *arg) {
  long me = (long)arg;
  for (int i = 0; i < iters; i++) {
    if (me == 0 || i % 8 == 0) {
      struct timespec far = in_ns(10000000000L);
      if (i % 3 == 0   ? pthread_rwlock_timedwrlock(&rw, &far) != 0
          : i % 3 == 1 ? pthread_rwlock_wrlock(&rw) != 0
                       : pthread_rwlock_trywrlock(&rw) != 0)
        continue;
      a++, b++, writes++;
      rw_unlock(&rw);
    } else {
      if ((i % 2 ? pthread_rwlock_rdlock(&rw) : pthread_rwlock_tryrdlock(&rw)) != 0) continue;
      if (a != b) __atomic_add_fetch(&torn, 1, __ATOMIC_RELAXED);
      rw_unlock(&rw);
    }
  }
  return NULL;
}

static void rwlocks(void) {
  run(rw_worker);
  check(torn == 0 && a == writes && b == writes && refused == 0,
        "rwlock: readers see whole writes, every unlock taken");
}

/* Read-mostly: readers hold two rwlocks at once (taken in order, one timed, released out of
 * order) between rare writes, the load a reader-biased lock is for; a write must still wait
 * for every reader. Both sides dawdle halfway, so that a writer let in beside a reader is seen.
 * Readers pause between reads so that a reader-preferring rwlock lets the writer in. */
static void dawdle(void) { /* 20 us of running */
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do clock_gettime(CLOCK_MONOTONIC, &t);
  while ((t.tv_sec - t0.tv_sec) * 1000000000L + t.tv_nsec - t0.tv_nsec < 20000);
}

static pthread_rwlock_t pair[2] = {PTHREAD_RWLOCK_INITIALIZER, PTHREAD_RWLOCK_INITIALIZER};
static volatile long first[2], second[2];
static long pair_torn, pair_reads, pair_failed;
static int pair_done;

static void *pair_reader(void *arg) {
  (void)arg;
  struct timespec pause = {0, 10000};
  while (!__atomic_load_n(&pair_done, __ATOMIC_ACQUIRE)) {
    struct timespec far = in_ns(10000000000L);
    if (pthread_rwlock_timedrdlock(&pair[0], &far) != 0 || pthread_rwlock_rdlock(&pair[1]) != 0) {
      __atomic_add_fetch(&pair_failed, 1, __ATOMIC_RELAXED);
      break;
    }
    long seen0 = first[0], seen1 = first[1];
    dawdle(); /* a writer let in now would be seen */
    int whole = seen0 == second[0];
    rw_unlock(&pair[0]);
    whole = whole && seen1 == second[1];
    rw_unlock(&pair[1]);
    if (!whole) __atomic_add_fetch(&pair_torn, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&pair_reads, 1, __ATOMIC_RELAXED);
    nanosleep(&pause, NULL);
  }
  return NULL;
}

static void read_mostly(void) {
  pthread_t t[64];
  int writes = iters / 12 + 1;
  for (long i = 1; i < threads; i++) pthread_create(&t[i], NULL, pair_reader, NULL);
  struct timespec gap = {0, 200000};
  for (int i = 0; i < writes; i++) {
    nanosleep(&gap, NULL);
    pthread_rwlock_wrlock(&pair[i % 2]);
    first[i % 2]++;
    dawdle();
    second[i % 2]++;
    rw_unlock(&pair[i % 2]);
  }
  __atomic_store_n(&pair_done, 1, __ATOMIC_RELEASE);
  for (int i = 1; i < threads; i++) pthread_join(t[i], NULL);
  long total = first[0] + first[1];
  check(pair_torn == 0 && pair_failed == 0 && pair_reads > 0 && total == writes &&
            second[0] + second[1] == writes && refused == 0,
        "rwlock: read-mostly, two held at once, writes wait for readers");
}

/* A bounded queue on one mutex and two condition variables. */
#define QCAP 16
static pthread_mutex_t qm = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t not_empty = PTHREAD_COND_INITIALIZER, not_full = PTHREAD_COND_INITIALIZER;
static long queue[QCAP], qhead, qlen, produced, consumed;

static void *producer(void *arg) {
  (void)arg;
  for (int i = 1; i <= iters; i++) {
    pthread_mutex_lock(&qm);
    while (qlen == QCAP) pthread_cond_wait(&not_full, &qm);
    queue[(qhead + qlen++) % QCAP] = i;
    produced += i;
    pthread_cond_signal(&not_empty);
    pthread_mutex_unlock(&qm);
  }
  return NULL;
}

static void *consumer(void *arg) {
  long want = (long)arg;
  for (long got = 0; got < want; got++) {
    pthread_mutex_lock(&qm);
    while (qlen == 0) pthread_cond_wait(&not_empty, &qm);
    consumed += queue[qhead];
    qhead = (qhead + 1) % QCAP, qlen--;
    pthread_cond_broadcast(&not_full);
    pthread_mutex_unlock(&qm);
  }
  return NULL;
}

static void conds(void) {
  pthread_t p[2], c[2];
  for (int i = 0; i < 2; i++) pthread_create(&p[i], NULL, producer, NULL);
  for (long i = 0; i < 2; i++) pthread_create(&c[i], NULL, consumer, (void *)(long)iters);
  for (int i = 0; i < 2; i++) pthread_join(p[i], NULL), pthread_join(c[i], NULL);
  check(produced == consumed && qlen == 0, "cond: every item produced is consumed once");
}

/* A timed wait nobody signals times out, near its deadline; the mutex is held again. */
static void timeouts(void) {
  pthread_cond_t c = PTHREAD_COND_INITIALIZER;
  struct timespec t0, t1, until = in_ns(50000000);
  clock_gettime(CLOCK_REALTIME, &t0);
  pthread_mutex_lock(&qm);
  int rc = 0;
  while (rc == 0) rc = pthread_cond_timedwait(&c, &qm, &until);
  clock_gettime(CLOCK_REALTIME, &t1);
  int busy = pthread_mutex_trylock(&qm); /* held by us: a normal mutex says EBUSY */
  pthread_mutex_unlock(&qm);
  double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  check(rc == ETIMEDOUT && s >= 0.045 && s < 5 && busy == EBUSY, "cond: timed wait times out");
}

/* Holds `one` from *arg = 1 until *arg = 2 (or 30 s): however long the taker is kept off its
 * core, it finds the mutex held. */
static void *hold_one(void *arg) {
  pthread_mutex_lock(&one);
  __atomic_store_n((int *)arg, 1, __ATOMIC_RELEASE);
  struct timespec t = {0, 1000000};
  for (int i = 0; i < 30000 && __atomic_load_n((int *)arg, __ATOMIC_ACQUIRE) != 2; i++)
    nanosleep(&t, NULL);
  pthread_mutex_unlock(&one);
  return NULL;
}

/* trylock and timedlock against a holder; errno untouched; recursive mutexes recurse. */
static void semantics(void) {
  int held = 0;
  pthread_t t;
  pthread_create(&t, NULL, hold_one, &held);
  while (__atomic_load_n(&held, __ATOMIC_ACQUIRE) == 0) sched_yield();
  struct timespec soon = in_ns(10000000);
  errno = 1234;
  int busy = pthread_mutex_trylock(&one), timed = pthread_mutex_timedlock(&one, &soon);
  __atomic_store_n(&held, 2, __ATOMIC_RELEASE);
  check(busy == EBUSY && timed == ETIMEDOUT && errno == 1234, "mutex: trylock, timedlock, errno");
  pthread_join(t, NULL);
  pthread_mutexattr_t at;
  pthread_mutex_t rec;
  pthread_mutexattr_init(&at);
  pthread_mutexattr_settype(&at, PTHREAD_MUTEX_RECURSIVE);
  pthread_mutex_init(&rec, &at);
  int r1 = pthread_mutex_lock(&rec), r2 = pthread_mutex_lock(&rec);
  pthread_mutex_unlock(&rec), pthread_mutex_unlock(&rec);
  check(r1 == 0 && r2 == 0 && pthread_mutex_trylock(&rec) == 0, "mutex: recursive recurses");
  pthread_mutex_unlock(&rec);
}

/* Objects initialised again start unlocked, try locks refuse a holder of the other side, an
 * error-checking mutex keeps its errors (pthread's: never swapped), and a forked child
 * unlocks what the forking thread held, then locks and unlocks again. */
static int init_again(void) {
  pthread_mutex_t m;
  pthread_rwlock_t l;
  int ok = 1;
  for (int round = 0; round < 2; round++) {
    ok &= pthread_mutex_init(&m, NULL) == 0 && pthread_mutex_lock(&m) == 0 &&
          pthread_mutex_trylock(&m) == EBUSY && pthread_mutex_unlock(&m) == 0 &&
          pthread_mutex_destroy(&m) == 0;
    ok &= pthread_rwlock_init(&l, NULL) == 0 && pthread_rwlock_rdlock(&l) == 0 &&
          pthread_rwlock_trywrlock(&l) == EBUSY && pthread_rwlock_unlock(&l) == 0 &&
          pthread_rwlock_wrlock(&l) == 0 && pthread_rwlock_tryrdlock(&l) == EBUSY &&
          pthread_rwlock_unlock(&l) == 0 && pthread_rwlock_destroy(&l) == 0;
  }
  return ok;
}

static int error_checking(void) {
  pthread_mutexattr_t at;
  pthread_mutex_t ec;
  pthread_mutexattr_init(&at);
  pthread_mutexattr_settype(&at, PTHREAD_MUTEX_ERRORCHECK);
  pthread_mutex_init(&ec, &at);
  return pthread_mutex_lock(&ec) == 0 && pthread_mutex_lock(&ec) == EDEADLK &&
         pthread_mutex_unlock(&ec) == 0 && pthread_mutex_unlock(&ec) == EPERM;
}

/* Locks of its own: an earlier section that failed may have left one of its locks held. */
static pthread_mutex_t forked = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t forked_rw = PTHREAD_RWLOCK_INITIALIZER;

static int across_fork(void) {
  pthread_mutex_lock(&forked);
  pid_t pid = fork();
  if (pid == 0) {
    int ok = pthread_mutex_unlock(&forked) == 0 && pthread_mutex_lock(&forked) == 0 &&
             pthread_mutex_unlock(&forked) == 0 && pthread_rwlock_wrlock(&forked_rw) == 0 &&
             pthread_rwlock_unlock(&forked_rw) == 0;
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  int ok = pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
           WEXITSTATUS(status) == 0;
  return pthread_mutex_unlock(&forked) == 0 && ok;
}

static void lifecycle(void) {
  int again = init_again(), errors = error_checking(), forked = across_fork();
  check(again && errors && forked, "init again, error-checking mutex, fork");
}

int main(int argc, char **argv) {
  if (argc > 1) threads = atoi(argv[1]);
  if (argc > 2) iters = atoi(argv[2]);
  if (threads < 2 || threads > 64 || iters < 1) return 2;
  setvbuf(stdout, NULL, _IOLBF, 0);
  mutexes();
  contended();
  rwlocks();
  read_mostly();
  conds();
  timeouts();
  semantics();
  lifecycle();
  return failed;
}
