/* The grader's own kit-style Lab 2 server: what a one-server lab's `main` is timed against
 * (bursts.check_concurrency, timing's clock probe, the leaderboard). Written from the kit's
 * contract alone, the way the lab asks a student to write it, so that a student's server
 * is compared with a server of the same shape, not with lockbench's own:
 *
 *   kitrefD n ip port      D, the lock design (-DDESIGN=D): 1 one mutex, 2 a mutex per
 *                          string, 3 one rwlock, 4 an rwlock per string
 *
 * It listens on the port as the kit does (no htons: the byte-swapped twin), accepts 1000
 * connections a batch with one thread each (the thread reads one 100-byte request
 * "pos-is_read-text", holds the string's lock across the access, whose get and set each
 * sleep 10 us as the kit's common.h does, replies with the string after the access and
 * closes), joins them, and appends the batch's mean latency (%e, seconds, from the
 * request read to the reply ready, the lock waiting included) to
 * server_output_time_aggregated. Built by CMake beside liblocktrace.so, and by the
 * platform bundles' setup.sh with gcc. */
#include <arpa/inet.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BATCH 1000
#define BUF 100

#if DESIGN == 1
static pthread_mutex_t one_mutex = PTHREAD_MUTEX_INITIALIZER;
#define RLOCK(i) pthread_mutex_lock(&one_mutex)
#define WLOCK(i) pthread_mutex_lock(&one_mutex)
#define UNLOCK(i) pthread_mutex_unlock(&one_mutex)
#elif DESIGN == 2
static pthread_mutex_t *mutexes;
#define RLOCK(i) pthread_mutex_lock(&mutexes[i])
#define WLOCK(i) pthread_mutex_lock(&mutexes[i])
#define UNLOCK(i) pthread_mutex_unlock(&mutexes[i])
#elif DESIGN == 3
static pthread_rwlock_t one_rwlock = PTHREAD_RWLOCK_INITIALIZER;
#define RLOCK(i) pthread_rwlock_rdlock(&one_rwlock)
#define WLOCK(i) pthread_rwlock_wrlock(&one_rwlock)
#define UNLOCK(i) pthread_rwlock_unlock(&one_rwlock)
#elif DESIGN == 4
static pthread_rwlock_t *rwlocks;
#define RLOCK(i) pthread_rwlock_rdlock(&rwlocks[i])
#define WLOCK(i) pthread_rwlock_wrlock(&rwlocks[i])
#define UNLOCK(i) pthread_rwlock_unlock(&rwlocks[i])
#else
#error "DESIGN must be 1, 2, 3 or 4"
#endif

static char (*strings)[BUF];
static int n;
static double latency[BATCH];

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void init_locks(void) {
#if DESIGN == 2
  mutexes = calloc((size_t)n, sizeof *mutexes);
  for (int i = 0; mutexes && i < n; i++) pthread_mutex_init(&mutexes[i], NULL);
  if (!mutexes) exit(1);
#elif DESIGN == 4
  rwlocks = calloc((size_t)n, sizeof *rwlocks);
  for (int i = 0; rwlocks && i < n; i++) pthread_rwlock_init(&rwlocks[i], NULL);
  if (!rwlocks) exit(1);
#endif
}

/* One connection: the argument packs its descriptor and its place in the batch. */
static void *serve(void *arg) {
  long packed = (long)arg;
  int fd = (int)(packed >> 16), slot = (int)(packed & 0xffff);
  char req[BUF] = {0}, reply[BUF] = {0};
  latency[slot] = 0;
  ssize_t got = read(fd, req, BUF);
  req[BUF - 1] = 0;
  char *rest = req, *pos_s = strsep(&rest, "-"), *read_s = strsep(&rest, "-");
  int pos = pos_s ? atoi(pos_s) : -1;
  if (got <= 0 || !read_s || !rest || pos < 0 || pos >= n) {
    close(fd);
    return NULL;
  }
  double t0 = now();
  if (atoi(read_s)) {
    RLOCK(pos);
    usleep(10);
    memcpy(reply, strings[pos], BUF);
  } else {
    WLOCK(pos);
    usleep(10);
    strncpy(strings[pos], rest, BUF - 1);
    usleep(10);
    memcpy(reply, strings[pos], BUF);
  }
  UNLOCK(pos);
  latency[slot] = now() - t0;
  if (write(fd, reply, BUF) < 0) latency[slot] = 0;
  close(fd);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 4 || (n = atoi(argv[1])) <= 0) {
    fprintf(stderr, "usage: %s n ip port\n", argv[0]);
    return 2;
  }
  strings = calloc((size_t)n, BUF);
  if (!strings) return 1;
  for (int i = 0; i < n; i++) snprintf(strings[i], BUF, "String %d: the initial value", i);
  init_locks();
  struct sockaddr_in addr = {.sin_family = AF_INET};
  addr.sin_addr.s_addr = inet_addr(argv[2]);
  addr.sin_port = (in_port_t)atoi(argv[3]); /* as the kit does: no htons */
  int srv = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  setsockopt(srv, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (srv < 0 || bind(srv, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(srv, 2000) < 0) {
    perror("kitref");
    return 1;
  }
  static pthread_t threads[BATCH];
  for (;;) {
    int started[BATCH] = {0};
    for (int i = 0; i < BATCH; i++) {
      int fd = accept(srv, NULL, NULL);
      void *arg = (void *)(((long)fd << 16) | i);
      if (fd < 0) latency[i] = 0;
      else if (!(started[i] = pthread_create(&threads[i], NULL, serve, arg) == 0)) serve(arg);
    }
    double sum = 0;
    for (int i = 0; i < BATCH; i++) {
      if (started[i]) pthread_join(threads[i], NULL);
      sum += latency[i];
    }
    FILE *f = fopen("server_output_time_aggregated", "a");
    if (f) {
      fprintf(f, "%e\n", sum / BATCH);
      fclose(f);
    }
  }
}
