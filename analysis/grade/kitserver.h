/* The kit-style Lab 2 server, written from the course kit's contract alone (docs/server.md,
 * docs/grading.md): mainN n ip port, the kit's port quirk, one thread per connection and
 * one 100-byte request per connection, 1000-request batches, the batch mean appended to
 * server_output_time_aggregated. As it stands it serves correctly:
 *   VARIANT 1 one mutex, 2 a mutex per string, 3 one rwlock, 4 an rwlock per string.
 * It is the grader's own reference servers (kitref.c, what a one-server lab's `main` is
 * timed against) and every test fixture under tests/fixtures/ (tests/fixtures/common/kitserver.h
 * is a link to this file), so a student's server is compared with, and the tests are made of,
 * one server of the shape the lab asks for.
 *
 * A fixture's main.c holds only what makes it that fixture. Before including this file it
 * may define
 *   LOCK_DESIGN 1..4     the design the server really has, numbered as above (default
 *                        VARIANT), or RLOCK(i), WLOCK(i), UNLOCK(i) and LOCKS_INIT() for
 *                        locks of its own (or none);
 *   NO_LOCK              no lock at all, and strings copied a few bytes at a time with a
 *                        yield in between, so concurrent readers see torn values;
 *   ACCESS_DELAY()       what each access sleeps (default usleep(10); the 2018 kit: none);
 *   CLOCK_AFTER_LOCK     start each request's clock once its lock is held (lock waiting
 *                        left out of the timing lines, a mistake students make);
 *   RACY_CLOCK           keep the start time in one global shared by every thread (another
 *                        mistake: each thread reads whichever start was written last);
 *   OLD_VALUE_REPLY      answer a write with the string it replaced (get before set);
 *   HTONS_PORT           listen on htons(port), not the kit's byte-swapped twin;
 *   CLOCK_AFTER_REPLY    stop each request's clock after its reply was sent, not when it
 *                        is ready (a few microseconds more: not told apart);
 *   LATE_LINE            write a batch's line only when the next batch's first connection
 *                        arrives (the file is always one line behind);
 *   EARLY_LINE           write a batch's line as soon as its 1000th connection is accepted,
 *                        before joining its threads (an average of requests still running:
 *                        the previous batch's times, zeros in the first);
 *   REPLY_BYTES(out)     how many bytes of the reply buffer are written (default all 100;
 *                        strlen(out) + 1 is a short reply the kit's client accepts, 0 none);
 *   ARGS_DEFAULTS        run with defaults (n 1000, 127.0.0.1, port 3000) when started
 *                        with no arguments;
 *   OWN_<STEP>           to write that step itself, after the include:
 *     OWN_INITIAL_VALUE  static void initial_value(char *s, int i);   string i at start
 *     OWN_ON_START       static void on_start(int argc, char **argv); before the socket
 *     OWN_PARSE_REQUEST  static int parse_request(char *buf, ssize_t got, int *pos,
 *                                                 int *is_read, char **text);
 *     OWN_ON_REQUEST     static void on_request(void);      a request parsed, not served
 *     OWN_COPY_STRING    static void copy_string(char *dst, const char *src);
 *     OWN_START_REQUEST  static void start_request(int i, void *arg);  connection i
 *     OWN_JOIN_BATCH     static double join_batch(void);    the batch's summed latency
 *     OWN_ON_REPORT      static double on_report(double mean);  the value written
 *
 * The grader sees only a submission's own folder, so the tests copy a fixture, this header
 * and (for a fixture without a Makefile of its own) tests/fixtures/common/Makefile into one
 * folder (analysis/tests/helpers.py kit_fixture); built in place by hand, the Makefile finds
 * it in ../common (../../common from hostile/<case>). A hostile case's test may write
 * hostile_gen.h beside it with values known only then (MARKER, mark_process: the hostile
 * cases'; unused otherwise). */
#include <arpa/inet.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/time.h>
#include <unistd.h>

#if __has_include("hostile_gen.h")
#include "hostile_gen.h"
#endif
#ifndef MARKER
#define MARKER "lbh-byhand" /* the hostile test writes a unique one per case */
#endif

#define COM_NUM_REQUEST 1000
#define COM_BUFF_SIZE 100
#define TIMING_FILE "server_output_time_aggregated"

static char **theArray;
static int n;
static double times[COM_NUM_REQUEST];
static pthread_t threads[COM_NUM_REQUEST];
static int to_join[COM_NUM_REQUEST]; /* connection i's thread is still to be joined */

#ifdef NO_LOCK
#define RLOCK(i) (void)0
#define WLOCK(i) (void)0
#define UNLOCK(i) (void)0
#endif
#ifndef RLOCK
#ifndef LOCK_DESIGN
#define LOCK_DESIGN VARIANT
#endif
/* A lock per string (designs 2 and 4): n of them in `locks`, each set up by `init`. */
#define STRING_LOCKS_INIT(locks, init)                 \
  do {                                                 \
    locks = malloc(n * sizeof *locks);                 \
    for (int j = 0; j < n; j++) init(&locks[j], NULL); \
  } while (0)
#if LOCK_DESIGN == 1
static pthread_mutex_t array_mutex = PTHREAD_MUTEX_INITIALIZER;
#define RLOCK(i) pthread_mutex_lock(&array_mutex)
#define WLOCK(i) pthread_mutex_lock(&array_mutex)
#define UNLOCK(i) pthread_mutex_unlock(&array_mutex)
#elif LOCK_DESIGN == 2
static pthread_mutex_t *string_mutexes;
#define LOCKS_INIT() STRING_LOCKS_INIT(string_mutexes, pthread_mutex_init)
#define RLOCK(i) pthread_mutex_lock(&string_mutexes[i])
#define WLOCK(i) pthread_mutex_lock(&string_mutexes[i])
#define UNLOCK(i) pthread_mutex_unlock(&string_mutexes[i])
#elif LOCK_DESIGN == 3
static pthread_rwlock_t array_rwlock = PTHREAD_RWLOCK_INITIALIZER;
#define RLOCK(i) pthread_rwlock_rdlock(&array_rwlock)
#define WLOCK(i) pthread_rwlock_wrlock(&array_rwlock)
#define UNLOCK(i) pthread_rwlock_unlock(&array_rwlock)
#else
static pthread_rwlock_t *string_rwlocks;
#define LOCKS_INIT() STRING_LOCKS_INIT(string_rwlocks, pthread_rwlock_init)
#define RLOCK(i) pthread_rwlock_rdlock(&string_rwlocks[i])
#define WLOCK(i) pthread_rwlock_wrlock(&string_rwlocks[i])
#define UNLOCK(i) pthread_rwlock_unlock(&string_rwlocks[i])
#endif
#endif
#ifndef LOCKS_INIT
#define LOCKS_INIT() (void)0
#endif
#ifndef REPLY_BYTES
#define REPLY_BYTES(out) COM_BUFF_SIZE
#endif
#ifndef ACCESS_DELAY
#define ACCESS_DELAY() usleep(10) /* the kit's getContent/setContent (2019 on) */
#endif

static void *handle(void *arg);

/* Each step a fixture may write itself: its prototype here, its body in main.c. */
#ifdef OWN_INITIAL_VALUE
static void initial_value(char *s, int i);
#else
static void initial_value(char *s, int i) { sprintf(s, "String %d: the initial value", i); }
#endif

#ifdef OWN_ON_START
static void on_start(int argc, char **argv);
#else
static void on_start(int argc, char **argv) {
  (void)argc;
  (void)argv;
}
#endif

/* pos-is_read-text; 0 for an empty or bad request, which is closed without a reply. A
 * fixture's own parse_request may call it. */
__attribute__((unused)) static int kit_parse_request(char *buf, ssize_t got, int *pos, int *is_read,
                                                     char **text) {
  if (got <= 0) return 0;
  buf[COM_BUFF_SIZE - 1] = 0;
  char *p = buf;
  char *a = strsep(&p, "-"), *b = strsep(&p, "-");
  if (a == NULL || b == NULL || p == NULL) return 0;
  *pos = atoi(a);
  *is_read = atoi(b);
  *text = p;
  return *pos >= 0 && *pos < n;
}
#ifdef OWN_PARSE_REQUEST
static int parse_request(char *buf, ssize_t got, int *pos, int *is_read, char **text);
#else
static int parse_request(char *buf, ssize_t got, int *pos, int *is_read, char **text) {
  return kit_parse_request(buf, got, pos, is_read, text);
}
#endif

#ifdef OWN_ON_REQUEST
static void on_request(void);
#else
static void on_request(void) {}
#endif

#ifdef OWN_COPY_STRING
static void copy_string(char *dst, const char *src);
#elif defined(NO_LOCK)
static void copy_string(char *dst, const char *src) {
  for (int i = 0; i < COM_BUFF_SIZE - 1; i++) {
    dst[i] = src[i];
    if (src[i] == 0) break;
    if (i % 4 == 3) sched_yield();
  }
}
#else
static void copy_string(char *dst, const char *src) { strncpy(dst, src, COM_BUFF_SIZE - 1); }
#endif

#ifdef OWN_START_REQUEST
static void start_request(int i, void *arg);
#else
static void start_request(int i, void *arg) {
  /* out of threads (a process limit): serve this one in the accepting thread */
  to_join[i] = pthread_create(&threads[i], NULL, handle, arg) == 0;
  if (!to_join[i]) handle(arg);
}
#endif

#ifdef OWN_JOIN_BATCH
static double join_batch(void);
#else
static double join_batch(void) {
  double sum = 0;
  for (int i = 0; i < COM_NUM_REQUEST; i++) {
    if (to_join[i]) pthread_join(threads[i], NULL);
    sum += times[i];
  }
  return sum;
}
#endif

#ifdef OWN_ON_REPORT
static double on_report(double mean);
#else
static double on_report(double mean) { return mean; }
#endif

/* Rewrites this process's command line (/proc/PID/cmdline) and name (comm) to MARKER, so
 * the hostile test can find every process of the case on the host. The arguments are read
 * first. */
__attribute__((unused)) static void mark_process(int argc, char **argv) {
  char *end = argv[argc - 1] + strlen(argv[argc - 1]);
  memset(argv[0], 0, (size_t)(end - argv[0]));
  strncpy(argv[0], MARKER, (size_t)(end - argv[0]));
  prctl(PR_SET_NAME, MARKER, 0, 0, 0);
}

static double now(void) {
  struct timeval tv;
  gettimeofday(&tv, NULL);
  return tv.tv_sec + tv.tv_usec / 1e6;
}

/* One connection: the argument packs its descriptor and its place in the batch. Returns
 * the request's latency for a joiner that wants it (NULL when no request was served). */
static void *handle(void *arg) {
  long k = (long)arg;
  int fd = (int)(k >> 16), slot = (int)(k & 0xffff);
  char buf[COM_BUFF_SIZE] = {0}, out[COM_BUFF_SIZE] = {0};
  times[slot] = 0;
  ssize_t got = read(fd, buf, COM_BUFF_SIZE);
  int pos, is_read;
  char *text;
  if (!parse_request(buf, got, &pos, &is_read, &text)) {
    close(fd);
    return NULL;
  }
  on_request();
#ifdef RACY_CLOCK
  static double t0_shared;
  t0_shared = now();
#define t0 t0_shared
#else
  double t0 = now();
#endif
  if (is_read) {
    RLOCK(pos);
#ifdef CLOCK_AFTER_LOCK
    t0 = now();
#endif
    ACCESS_DELAY();
    copy_string(out, theArray[pos]);
    UNLOCK(pos);
  } else {
    WLOCK(pos);
#ifdef CLOCK_AFTER_LOCK
    t0 = now();
#endif
#ifdef OLD_VALUE_REPLY /* get before set: the reply is the string the write replaced */
    copy_string(out, theArray[pos]);
#endif
    ACCESS_DELAY();
    copy_string(theArray[pos], text);
    ACCESS_DELAY();
#ifndef OLD_VALUE_REPLY
    copy_string(out, theArray[pos]);
#endif
    UNLOCK(pos);
  }
#ifndef CLOCK_AFTER_REPLY
  times[slot] = now() - t0;
#endif
  if (REPLY_BYTES(out) > 0) write(fd, out, REPLY_BYTES(out));
#ifdef CLOCK_AFTER_REPLY
  times[slot] = now() - t0;
#endif
#undef t0
  close(fd);
  return &times[slot];
}

static void write_line(double mean) {
  /* O_NOFOLLOW: the symlink_timing case's link is for the grader to read; the server
   * itself never writes through it (whoever runs it: by hand as root, /etc/shadow) */
  int tfd = open(TIMING_FILE, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW, 0644);
  FILE *f = tfd < 0 ? NULL : fdopen(tfd, "a");
  if (f) {
    fprintf(f, "%e\n", on_report(mean));
    fclose(f);
  }
}

int main(int argc, char *argv[]) {
#ifdef ARGS_DEFAULTS
  static char *defaults[] = {NULL, "1000", "127.0.0.1", "3000", NULL};
  if (argc == 1) {
    defaults[0] = argv[0];
    argv = defaults;
    argc = 4;
  }
#endif
  if (argc != 4) {
    fprintf(stderr, "usage: %s n ip port\n", argv[0]);
    return 1;
  }
  n = atoi(argv[1]);
  struct sockaddr_in sock_var;
  memset(&sock_var, 0, sizeof sock_var);
  sock_var.sin_family = AF_INET;
  sock_var.sin_addr.s_addr = inet_addr(argv[2]);
#ifdef HTONS_PORT /* the textbook's way, not the kit's: the kit's client cannot reach it */
  sock_var.sin_port = htons(atoi(argv[3]));
#else
  sock_var.sin_port = atoi(argv[3]); /* as the kit does: no htons */
#endif
  theArray = malloc(n * sizeof(char *));
  for (int i = 0; i < n; i++) {
    theArray[i] = malloc(COM_BUFF_SIZE);
    initial_value(theArray[i], i);
  }
  LOCKS_INIT();
  on_start(argc, argv);
  int server = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(server, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(server, (struct sockaddr *)&sock_var, sizeof sock_var) < 0) {
    perror("bind");
    return 1;
  }
  listen(server, 2000);
  __attribute__((unused)) double pending = -1; /* LATE_LINE: the mean still to write */
  for (;;) {
    for (int i = 0; i < COM_NUM_REQUEST; i++) {
      int fd = accept(server, NULL, NULL);
#ifdef LATE_LINE
      if (i == 0 && pending >= 0) write_line(pending);
#endif
      start_request(i, (void *)(((long)fd << 16) | i));
    }
#ifdef EARLY_LINE
    double early = 0;
    for (int i = 0; i < COM_NUM_REQUEST; i++) early += times[i];
    write_line(early / COM_NUM_REQUEST);
#endif
    double sum = join_batch();
#ifdef LATE_LINE
    pending = sum / COM_NUM_REQUEST;
#elif !defined(EARLY_LINE)
    write_line(sum / COM_NUM_REQUEST);
#else
    (void)sum;
#endif
  }
  return 0;
}
