/* lockprof: an LD_PRELOAD lock profiler, lock swapper and per-request lock tracer for any
 * dynamically linked program (./lockbench profile; the command is analysis/profile.py, the
 * story docs/profile.md; the tracer is the grader's design check, analysis/grade/design.py).
 *
 * Profiler. Every pthread mutex, rwlock and condition variable call is forwarded and noted
 * in a record per lock object (by address and kind): acquisitions per mode, contended
 * acquisitions (a trylock first; when it fails the acquisition was contended and the
 * blocking call follows), failed trylocks, and log2 histograms of the wait and the hold in
 * nanoseconds (CLOCK_MONOTONIC through the vDSO: no calibration, the same clock on every
 * core), plus the return address of the first call, named with dladdr at dump time.
 * At exit (a destructor) or on SIGINT/SIGTERM (a handler of ours, installed only where the
 * program left the default action; it dumps, then the signal kills as it would have) one
 * JSON document goes to $LOCKPROF_FILE ("%p" there becomes the pid: a forked child writes
 * its own), written to a temporary name and renamed, so a reader sees all of it or nothing.
 *
 * Swapper. $LOCKPROF_SWAP (ticketlock, mcs, ttas-backoff, clh, futex-mutex: the names of
 * the same lock families among lockserver's strategies) replaces every normal or adaptive
 * pthread mutex by our lock and every rwlock by a phase-fair one, pflock ($LOCKPROF_SWAP_RW:
 * bravo-pflock, BRAVO over pflock, or a mutex lock taken exclusively, or pthread);
 * $LOCKPROF_SWAP=pflock or bravo-pflock swaps the rwlocks alone. The state lives in the
 * record, not in the pthread object, whose layout is glibc's; condition waits on a swapped mutex
 * release our lock, sleep on a futex sequence counter of the record, and take it back. Flat
 * combining is not among them: it runs critical sections handed to it, and a pthread lock's is the
 * caller's own code between two calls.
 *
 * Tracer. With $LOCKTRACE_FD or $LOCKTRACE_FILE it records which lock objects each request of
 * a kit-style server touched (the section "the per-request trace" says how and in which
 * format). It combines with the other two; the grader uses it alone. Without it, the read,
 * recv, write, send and close it also wraps cost one check and the forwarding.
 *
 * It runs inside someone else's program, so on the lock path it never allocates (records
 * in a static open-addressing table, inserted by compare-and-swap on the key; per-thread
 * state in initial-exec TLS), takes no lock of its own, keeps errno, and never blocks or
 * crashes the program: a full table leaves the object to pthread, uncounted. No limit on
 * threads: nothing is kept per thread outside TLS. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>
#endif

#define TLS __thread __attribute__((tls_model("initial-exec")))
#define TABLE_BITS 16
#define TABLE_SIZE (1u << TABLE_BITS)
#define MAX_PROBE 256   /* a key is found within this many slots of its hash, or never */
#define BUCKETS 40      /* 0 ns, then [2^(k-1), 2^k) ns: the last one holds 2^38 ns (4.6 min) up */
#define HELD_MAX 64     /* locks one thread holds at once whose hold time is measured */
#define NODES 64        /* MCS queue nodes per thread: swapped MCS locks held at once */
#define TOKENS 64       /* CLH locks and BRAVO fast reads one thread holds at once */
#define CLH_POOL 65536  /* CLH queue nodes in the process: acquisitions under way at once */
#define VISIBLE_BITS 12 /* BRAVO's visible-readers table, shared by every lock: 4096 slots */
#define BRAVO_INHIBIT 9 /* the bias stays off 9 times as long as revoking it took */

#define RELAXED __ATOMIC_RELAXED
#define ACQUIRE __ATOMIC_ACQUIRE
#define RELEASE __ATOMIC_RELEASE
#define ACQ_REL __ATOMIC_ACQ_REL
#define SEQ_CST __ATOMIC_SEQ_CST
#define LOAD(p, o) __atomic_load_n(p, o)
#define STORE(p, v, o) __atomic_store_n(p, v, o)
#define ADD(p, v) __atomic_fetch_add(p, v, RELAXED)

enum kind { K_MUTEX = 1, K_RWLOCK = 2, K_COND = 3 };
/* Counter slots: a mutex uses the first, an rwlock read and write, a condvar all three. */
enum mode { M_MUTEX = 0, M_READ = 1, M_WRITE = 2, C_WAIT = 0, C_SIGNAL = 1, C_BROADCAST = 2 };
enum op { OP_LOCK, OP_TRY, OP_TIMED };

struct mcs_node {
  struct mcs_node *next;
  uint32_t waiting;
  const void *lock;
};

struct clh_node;

struct pf_state {
  uint32_t rin, rout, win, wout;
  uintptr_t writer;
};

/* A swapped lock's state. All zero is "unlocked" for every algorithm, so a new record needs
 * no initialisation and a pthread object reused at the same address finds it free. */
union state {
  struct {
    uint32_t next, owner;
  } ticket;
  struct mcs_node *tail;
  uint32_t ttas;
  struct pf_state pf;
  struct clh_node *clh; /* the last node enqueued; NULL: free */
  uint32_t futex;       /* 0 free, 1 held, 2 held and someone may sleep on it */
  struct {
    struct pf_state pf;     /* first: the phase-fair functions serve the slow path unchanged */
    uint32_t bias;          /* readers may take the fast path; off until a slow reader sets it */
    uint64_t inhibit_until; /* CLOCK_MONOTONIC ns: no bias before then */
  } bravo;
  struct {
    uint32_t seq, waiters;
  } cond;
};

struct hist {
  uint64_t count[BUCKETS], total, max;
};

struct rec {
  union state s __attribute__((aligned(64))); /* a line of its own: waiters spin on it */
  uintptr_t site __attribute__((aligned(64)));
  uint32_t impl; /* 1 + the index in ALGOS of the lock that served it; 0 pthread */
  uint64_t acq[3], contended, busy;
  uint64_t fast_reads; /* BRAVO: reads that took the fast path (counted when profiling) */
  struct hist wait, hold;
};

/* Keys apart from the records: probing reads 8 bytes a slot, and the dump scans 512 KiB
 * instead of touching every record's pages. key = address << 2 | kind, 0 = free. */
static uintptr_t keys[TABLE_SIZE];
static struct rec recs[TABLE_SIZE];
static uint64_t untracked_ops, holds_lost;

struct held {
  const void *o;
  struct rec *r;
  uint64_t t0;
  int kind;
};
static TLS struct held held[HELD_MAX];
static TLS int nheld;
static TLS struct mcs_node nodes[NODES];
static TLS uint64_t nodes_used;
/* What a CLH unlock and a BRAVO read unlock need from their lock: the node or slot, by the
 * lock's address. */
struct token {
  const void *lock;
  void *p;
};
static TLS struct token tokens[TOKENS];
static TLS uint64_t tokens_used;
static TLS int resolving;

struct algo {
  const char *name;
  int (*try_)(union state *s, const void *o, int mode); /* 0 or EBUSY */
  int (*lock)(union state *s, const void *o, int mode);
  int (*unlock)(union state *s, const void *o);
  /* Until the absolute time abs on clk (valid, REALTIME or MONOTONIC): 0 or ETIMEDOUT.
   * NULL: swap_timed tries until the deadline. */
  int (*timed)(union state *s, const void *o, int mode, clockid_t clk, const struct timespec *abs);
  int rw_only; /* a reader/writer lock: never a mutex's */
};
static const struct algo *mutex_algo, *rw_algo;
static int profiling, config_state;
static char out_path[PATH_MAX];
static union state fallback_cond; /* condvars the full table could not take share this one */

/* ------------------------------------------------------------------ small tools */

static uint64_t clock_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* The clock of every wait and hold: the TSC where it is invariant (one rate on every core,
 * in every power state), at a third to a half of clock_gettime's cost, two reads per
 * acquisition; CLOCK_MONOTONIC otherwise. Ticks become ns by tick_mult, 32.32 fixed point,
 * set once by calibrate() before any time is taken. */
static int use_tsc;
static uint64_t tick_mult = 1ull << 32;

static uint64_t now(void) {
#if defined(__x86_64__)
  if (use_tsc) return __rdtsc();
#endif
  return clock_ns();
}

static uint64_t to_ns(uint64_t ticks) {
  return (uint64_t)(((unsigned __int128)ticks * tick_mult) >> 32);
}

static void say(const char *a, const char *b) {
  syscall(SYS_write, 2, a, strlen(a));
  syscall(SYS_write, 2, b, strlen(b));
}

static uintptr_t self(void) { return (uintptr_t)&nheld; } /* unique among live threads */

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

/* Waiting, in three phases: pause loops doubling up to 128 (the holder is running on
 * another core), then yields (it is not: give it ours), then 20 us sleeps (it is asleep
 * itself; the machine may have more waiters than cores). Raw system calls: no libc
 * cancellation point where pthread_mutex_lock has none. */
static void relax(unsigned *n) {
  unsigned k = (*n)++;
  if (k < 8) {
    for (unsigned i = 0; i < (1u << k); i++) cpu_relax();
  } else if (k < 8 + 64) {
    syscall(SYS_sched_yield);
  } else {
    struct timespec t = {0, 20000};
    syscall(SYS_nanosleep, &t, NULL);
  }
}

static int ts_valid(const struct timespec *t) {
  return t && t->tv_nsec >= 0 && t->tv_nsec < 1000000000;
}

static int passed(clockid_t clk, const struct timespec *abs) {
  struct timespec t;
  clock_gettime(clk, &t);
  return t.tv_sec > abs->tv_sec || (t.tv_sec == abs->tv_sec && t.tv_nsec >= abs->tv_nsec);
}

/* Sleeps while *w == v (a change before the call returns at once), until the absolute time
 * abs on clk when timed; ETIMEDOUT or 0 (woken, interrupted, or *w had changed). */
static int futex_wait(uint32_t *w, uint32_t v, int timed, clockid_t clk,
                      const struct timespec *abs) {
  int op = FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG;
  if (timed && clk == CLOCK_REALTIME) op |= FUTEX_CLOCK_REALTIME;
  long rc = syscall(SYS_futex, w, op, v, timed ? abs : NULL, NULL, FUTEX_BITSET_MATCH_ANY);
  return rc == -1 && errno == ETIMEDOUT ? ETIMEDOUT : 0;
}

static void futex_wake(uint32_t *w, int n) {
  syscall(SYS_futex, w, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, n, NULL, NULL, 0);
}

/* ------------------------------------------------------------------ the record table */

static uint32_t slot_of(uintptr_t key) {
  return (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> (64 - TABLE_BITS));
}

/* The record of (o, kind), inserted on first sight; NULL when the MAX_PROBE slots from its
 * hash are all taken by others. Slots never empty, so such an object stays untracked for
 * good and is served by pthread every time: never half ours, half pthread's. */
static struct rec *find(const void *o, int kind) {
  uintptr_t key = (uintptr_t)o << 2 | (uintptr_t)kind;
  uint32_t i = slot_of(key);
  for (int probe = 0; probe < MAX_PROBE; probe++, i = (i + 1) & (TABLE_SIZE - 1)) {
    uintptr_t k = LOAD(&keys[i], ACQUIRE);
    if (k == 0 && __atomic_compare_exchange_n(&keys[i], &k, key, 0, ACQ_REL, ACQUIRE))
      return &recs[i];
    if (k == key) return &recs[i];
  }
  ADD(&untracked_ops, 1);
  return NULL;
}

static unsigned bucket(uint64_t ns) {
  unsigned b = ns ? 64u - (unsigned)__builtin_clzll(ns) : 0;
  return b < BUCKETS ? b : BUCKETS - 1;
}

static void hist_add(struct hist *h, uint64_t ns) {
  ADD(&h->count[bucket(ns)], 1);
  ADD(&h->total, ns);
  uint64_t m = LOAD(&h->max, RELAXED);
  while (ns > m && !__atomic_compare_exchange_n(&h->max, &m, ns, 1, RELAXED, RELAXED)) {
  }
}

static void note_site(struct rec *r, const void *site) {
  uintptr_t none = 0;
  if (!LOAD(&r->site, RELAXED))
    __atomic_compare_exchange_n(&r->site, &none, (uintptr_t)site, 0, RELAXED, RELAXED);
}

/* ------------------------------------------------------------------ hold times, per thread */

/* nheld is read once and checked both ways each time: a signal handler that locks (not
 * allowed, but done) may push or pop in between; entries may then be wrong, never outside
 * the array. */
static void hold_begin(const void *o, int kind, struct rec *r) {
  int n = nheld;
  if (n < 0 || n >= HELD_MAX) {
    ADD(&holds_lost, 1);
    return;
  }
  nheld = n + 1;
  held[n] = (struct held){o, r, now(), kind};
}

static struct held *held_of(const void *o, int kind) {
  int n = nheld;
  for (int i = (n > HELD_MAX ? HELD_MAX : n) - 1; i >= 0; i--)
    if (held[i].o == o && held[i].kind == kind) return &held[i];
  return NULL;
}

/* The hold of (o, kind) ends now; `keep` leaves it on the stack (a condition wait gives the
 * mutex back for a while and hold_resume starts the next stretch). Its record, or NULL. */
static struct rec *hold_end(const void *o, int kind, int keep) {
  struct held *h = held_of(o, kind);
  if (!h) return NULL; /* taken before we knew, by another thread, or past HELD_MAX */
  struct rec *r = h->r;
  hist_add(&r->hold, to_ns(now() - h->t0));
  int n = nheld;
  if (!keep && n > 0 && n <= HELD_MAX) *h = held[n - 1], nheld = n - 1;
  return r;
}

static void hold_resume(const void *o, int kind) {
  struct held *h = held_of(o, kind);
  if (h) h->t0 = now();
}

/* ------------------------------------------------------------------ the swap locks */

/* Ticket lock: take a number, wait for it to be served. FIFO, two words. */
static int ticket_try(union state *s, const void *o, int mode) {
  (void)o, (void)mode;
  uint32_t served = LOAD(&s->ticket.owner, RELAXED), expect = served;
  return __atomic_compare_exchange_n(&s->ticket.next, &expect, served + 1, 0, ACQUIRE, RELAXED)
             ? 0
             : EBUSY;
}

static int ticket_lock(union state *s, const void *o, int mode) {
  (void)o, (void)mode;
  uint32_t mine = ADD(&s->ticket.next, 1);
  for (unsigned n = 0; LOAD(&s->ticket.owner, ACQUIRE) != mine;) relax(&n);
  return 0;
}

static int ticket_unlock(union state *s, const void *o) {
  (void)o;
  uint32_t served = LOAD(&s->ticket.owner, RELAXED);
  if (served == LOAD(&s->ticket.next, RELAXED)) return EPERM; /* not locked: keep it sound */
  STORE(&s->ticket.owner, served + 1, RELEASE);
  return 0;
}

/* Test-and-test-and-set with exponential back-off (relax doubles the pause). */
static int ttas_try(union state *s, const void *o, int mode) {
  (void)o, (void)mode;
  return !LOAD(&s->ttas, RELAXED) && !__atomic_exchange_n(&s->ttas, 1, ACQUIRE) ? 0 : EBUSY;
}

static int ttas_lock(union state *s, const void *o, int mode) {
  for (unsigned n = 0; ttas_try(s, o, mode) != 0;) relax(&n);
  return 0;
}

static int ttas_unlock(union state *s, const void *o) {
  (void)o;
  STORE(&s->ttas, 0, RELEASE);
  return 0;
}

/* MCS: a queue of per-acquisition nodes, each waiter spinning on its own. The node of an
 * acquisition is this thread's, found again at unlock by the lock's address. */
static struct mcs_node *node_get(const void *o) {
  if (nodes_used == ~0ull) return NULL;
  int i = __builtin_ctzll(~nodes_used);
  nodes_used |= 1ull << i;
  nodes[i].lock = o;
  nodes[i].next = NULL;
  nodes[i].waiting = 1;
  return &nodes[i];
}

static void node_put(struct mcs_node *n) { nodes_used &= ~(1ull << (n - nodes)); }

static struct mcs_node *node_of(const void *o) {
  for (uint64_t m = nodes_used; m; m &= m - 1)
    if (nodes[__builtin_ctzll(m)].lock == o) return &nodes[__builtin_ctzll(m)];
  return NULL;
}

static int mcs_try(union state *s, const void *o, int mode) {
  (void)mode;
  struct mcs_node *me = node_get(o), *none = NULL;
  if (!me) return EAGAIN;
  if (__atomic_compare_exchange_n(&s->tail, &none, me, 0, ACQUIRE, RELAXED)) return 0;
  node_put(me);
  return EBUSY;
}

static int mcs_lock(union state *s, const void *o, int mode) {
  (void)mode;
  struct mcs_node *me = node_get(o);
  if (!me) return EAGAIN; /* NODES swapped MCS locks held at once already */
  struct mcs_node *pred = __atomic_exchange_n(&s->tail, me, ACQ_REL);
  if (!pred) return 0;
  STORE(&pred->next, me, RELEASE);
  for (unsigned n = 0; LOAD(&me->waiting, ACQUIRE);) relax(&n);
  return 0;
}

static int mcs_unlock(union state *s, const void *o) {
  struct mcs_node *me = node_of(o), *next, *expect;
  if (!me) return EPERM; /* not locked by this thread */
  next = LOAD(&me->next, ACQUIRE);
  if (!next) {
    expect = me;
    if (__atomic_compare_exchange_n(&s->tail, &expect, NULL, 0, RELEASE, RELAXED)) {
      node_put(me);
      return 0;
    }
    for (unsigned n = 0; !(next = LOAD(&me->next, ACQUIRE));) relax(&n); /* it is linking */
  }
  STORE(&next->waiting, 0, RELEASE);
  node_put(me);
  return 0;
}

/* Phase-fair ticket rwlock (Brandenburg and Anderson's PF-T). rin and rout count readers in
 * and out in steps of PF_RINC; the low bits of rin say a writer is present and its phase.
 * Readers that arrive in a write phase wait for that phase only; a writer waits for the
 * writers before it (win/wout tickets), then for the readers already in. */
#define PF_RINC 0x100u
#define PF_WBITS 0x3u
#define PF_PRES 0x2u
#define PF_PHID 0x1u

static int pf_read(union state *s) {
  uint32_t w = __atomic_fetch_add(&s->pf.rin, PF_RINC, ACQUIRE) & PF_WBITS;
  for (unsigned n = 0; w && (LOAD(&s->pf.rin, ACQUIRE) & PF_WBITS) == w;) relax(&n);
  return 0;
}

/* The write phase is ours (ticket t): tell readers, wait for the ones already in. */
static void pf_drain(union state *s, uint32_t t) {
  uint32_t in = __atomic_fetch_add(&s->pf.rin, PF_PRES | (t & PF_PHID), ACQ_REL);
  for (unsigned n = 0; LOAD(&s->pf.rout, ACQUIRE) != in;) relax(&n);
  STORE(&s->pf.writer, self(), RELAXED);
}

static int pf_lock(union state *s, const void *o, int mode) {
  (void)o;
  if (mode == M_READ) return pf_read(s);
  uint32_t t = ADD(&s->pf.win, 1);
  for (unsigned n = 0; LOAD(&s->pf.wout, ACQUIRE) != t;) relax(&n);
  pf_drain(s, t);
  return 0;
}

/* A try that sees no writer (and, to write, no reader) claims; a reader that slips in
 * between a writer's look and its claim is waited for, as briefly as its read lasts. */
static int pf_try(union state *s, const void *o, int mode) {
  (void)o;
  if (mode == M_READ) {
    uint32_t r = LOAD(&s->pf.rin, RELAXED);
    for (int i = 0; i < 8 && !(r & PF_WBITS); i++)
      if (__atomic_compare_exchange_n(&s->pf.rin, &r, r + PF_RINC, 1, ACQUIRE, RELAXED)) return 0;
    return EBUSY;
  }
  uint32_t t = LOAD(&s->pf.wout, ACQUIRE), expect = t;
  if ((LOAD(&s->pf.rin, RELAXED) & ~0xffu) != LOAD(&s->pf.rout, RELAXED)) return EBUSY;
  if (!__atomic_compare_exchange_n(&s->pf.win, &expect, t + 1, 0, ACQUIRE, RELAXED)) return EBUSY;
  pf_drain(s, t);
  return 0;
}

/* pthread_rwlock_unlock does not say which side it leaves: the writer wrote its name. */
static int pf_unlock(union state *s, const void *o) {
  (void)o;
  if (LOAD(&s->pf.writer, RELAXED) != self()) {
    /* Not read-locked when as many readers have left as came in. rout first, then rin: a
     * reader holding it is in rin and not in rout at both reads, and rout only grows, so it
     * is never taken for unlocked. (rin first let a reader that came and left in between
     * make the two equal: this unlock was refused, its exit never counted, and the next
     * writer waited for it for ever.) */
    uint32_t out = LOAD(&s->pf.rout, ACQUIRE);
    if ((LOAD(&s->pf.rin, ACQUIRE) & ~0xffu) == out) return EPERM;
    __atomic_fetch_add(&s->pf.rout, PF_RINC, RELEASE);
    return 0;
  }
  STORE(&s->pf.writer, 0, RELAXED);
  __atomic_fetch_and(&s->pf.rin, ~0xffu, RELEASE); /* the read phase begins */
  __atomic_fetch_add(&s->pf.wout, 1, RELEASE);     /* the next writer may go */
  return 0;
}

/* Tokens: per-thread (lock, pointer) pairs, taken from a free mask (not by nesting depth, so
 * locks released out of order find theirs) and found again at unlock by the lock's address.
 * -1 when TOKENS are held already. */
static int token_put(const void *o, void *p) {
  if (tokens_used == ~0ull) return -1;
  int i = __builtin_ctzll(~tokens_used);
  tokens_used |= 1ull << i;
  tokens[i] = (struct token){o, p};
  return 0;
}

static void *token_take(const void *o) {
  for (uint64_t m = tokens_used; m; m &= m - 1) {
    int i = __builtin_ctzll(m);
    if (tokens[i].lock == o) {
      tokens_used &= ~(1ull << i);
      return tokens[i].p;
    }
  }
  return NULL;
}

/* CLH queue lock (Craig; Magnussen, Landin and Hagersten): as MCS, a FIFO queue of nodes,
 * each waiter spinning on one flag, but the queue is implicit: a thread sets its node's flag,
 * swaps the node into the tail and spins on its predecessor's flag; unlock clears its own.
 * The successor spins on our node after we have returned, so nodes migrate instead of living
 * with a thread: the successor puts our node back in the pool once it has the lock (nobody
 * else refers to it then), and we put ours back ourselves when nobody queued behind us (a
 * compare-and-swap of the tail back to NULL, which is how all-zero means "free" here, where
 * common/store_clh_lock.h keeps a node in every lock instead). The pool is static (a thread
 * that exits leaves no node behind, and there is no allocation): a Treiber stack of indices
 * tagged with a generation against ABA, filled from never-used nodes on demand.
 * Wins: as MCS (FIFO, one cache-line transfer per hand-off), with a store for an unlock that
 * has a successor. Collapses: as every FIFO spin lock when threads outnumber cores (a
 * preempted waiter holds up everyone behind it); the pool's head is one more shared line,
 * written twice per acquisition; the flag spun on was written by another core (remote memory
 * on NUMA machines without coherent caches). */
struct clh_node {
  uint32_t locked; /* its owner holds or waits for the lock */
  uint32_t next_free;
} __attribute__((aligned(64)));
static struct clh_node clh_pool[CLH_POOL];
static uint64_t clh_free;  /* generation << 32 | (index + 1) of the first free node, 0: none */
static uint32_t clh_fresh; /* clh_pool[clh_fresh..] never used yet */

static struct clh_node *clh_get(void) {
  uint64_t h = LOAD(&clh_free, ACQUIRE);
  while ((uint32_t)h) {
    struct clh_node *n = &clh_pool[(uint32_t)h - 1];
    uint64_t next = ((h >> 32) + 1) << 32 | LOAD(&n->next_free, RELAXED);
    if (__atomic_compare_exchange_n(&clh_free, &h, next, 1, ACQUIRE, ACQUIRE)) return n;
  }
  uint32_t i = LOAD(&clh_fresh, RELAXED);
  while (i < CLH_POOL)
    if (__atomic_compare_exchange_n(&clh_fresh, &i, i + 1, 1, RELAXED, RELAXED))
      return &clh_pool[i];
  return NULL;
}

static void clh_put(struct clh_node *n) {
  uint64_t h = LOAD(&clh_free, RELAXED), mine = (uint64_t)(n - clh_pool) + 1, next;
  do {
    STORE(&n->next_free, (uint32_t)h, RELAXED);
    next = ((h >> 32) + 1) << 32 | mine;
  } while (!__atomic_compare_exchange_n(&clh_free, &h, next, 1, RELEASE, RELAXED));
}

/* A node of the pool, flagged and noted as this thread's for o; NULL (EAGAIN) when the pool
 * or the thread's tokens are exhausted. */
static struct clh_node *clh_node_for(const void *o) {
  struct clh_node *me = clh_get();
  if (!me) return NULL;
  if (token_put(o, me) != 0) {
    clh_put(me);
    return NULL;
  }
  STORE(&me->locked, 1, RELAXED); /* published by the release of the swap into the tail */
  return me;
}

static int clh_try(union state *s, const void *o, int mode) {
  (void)mode;
  struct clh_node *me = clh_node_for(o), *none = NULL;
  if (!me) return EAGAIN;
  if (__atomic_compare_exchange_n(&s->clh, &none, me, 0, ACQ_REL, RELAXED)) return 0;
  token_take(o);
  clh_put(me);
  return EBUSY;
}

static int clh_lock(union state *s, const void *o, int mode) {
  (void)mode;
  struct clh_node *me = clh_node_for(o);
  if (!me) return EAGAIN;
  struct clh_node *pred = __atomic_exchange_n(&s->clh, me, ACQ_REL);
  if (!pred) return 0;
  for (unsigned n = 0; LOAD(&pred->locked, ACQUIRE);) relax(&n);
  clh_put(pred); /* its owner let go of it with the clear, and we were its only successor */
  return 0;
}

static int clh_unlock(union state *s, const void *o) {
  struct clh_node *me = token_take(o), *expect = me;
  if (!me) return EPERM; /* not locked by this thread */
  if (__atomic_compare_exchange_n(&s->clh, &expect, NULL, 0, RELEASE, RELAXED)) {
    clh_put(me); /* nobody queued behind us: the node is ours again */
    return 0;
  }
  STORE(&me->locked, 0, RELEASE); /* the successor goes, and frees the node */
  return 0;
}

/* Futex mutex (Drepper, "Futexes Are Tricky", mutex 3): 0 free, 1 held, 2 held and maybe
 * sleepers. An uncontended lock and unlock are one atomic each and no system call; a
 * contended lock marks 2 and sleeps in the kernel until an unlock that saw 2 wakes one.
 * Wins: more runnable threads than cores (a waiter sleeps instead of burning the holder's
 * core, and the kernel runs whoever is woken), long critical sections. Collapses: short,
 * hot critical sections handed off fast: every contended hand-off costs a wake-up system call
 * and a sleeper's reschedule (microseconds) where a spin lock hands over in a cache miss; not
 * FIFO (a running thread may take it before the woken one). */
static int futex_try(union state *s, const void *o, int mode) {
  (void)o, (void)mode;
  uint32_t zero = 0;
  return __atomic_compare_exchange_n(&s->futex, &zero, 1, 0, ACQUIRE, RELAXED) ? 0 : EBUSY;
}

/* Once we have marked 2 we keep marking 2 when we take it: we cannot know nobody else sleeps,
 * so at worst an unlock makes one system call for nobody. */
static int futex_take(union state *s, int timed, clockid_t clk, const struct timespec *abs) {
  uint32_t c = 0;
  if (__atomic_compare_exchange_n(&s->futex, &c, 1, 0, ACQUIRE, RELAXED)) return 0;
  if (c != 2) c = __atomic_exchange_n(&s->futex, 2, ACQUIRE);
  while (c != 0) {
    if (futex_wait(&s->futex, 2, timed, clk, abs) == ETIMEDOUT) return ETIMEDOUT;
    c = __atomic_exchange_n(&s->futex, 2, ACQUIRE);
  }
  return 0;
}

static int futex_lock(union state *s, const void *o, int mode) {
  (void)o, (void)mode;
  return futex_take(s, 0, CLOCK_REALTIME, NULL);
}

static int futex_timed(union state *s, const void *o, int mode, clockid_t clk,
                       const struct timespec *abs) {
  (void)o, (void)mode;
  return futex_take(s, 1, clk, abs);
}

static int futex_unlock(union state *s, const void *o) {
  (void)o;
  if (LOAD(&s->futex, RELAXED) == 0) return EPERM; /* not locked: keep it sound */
  if (__atomic_fetch_sub(&s->futex, 1, RELEASE) != 1) {
    STORE(&s->futex, 0, RELEASE);
    futex_wake(&s->futex, 1);
  }
  return 0;
}

/* BRAVO (Dice and Kogan, ATC'19) over the phase-fair rwlock of the same state. While the
 * lock's bias is on, a reader hashes (its thread, the lock) to a slot of one process-wide
 * visible-readers table, installs the lock's address there by compare-and-swap, re-checks the
 * bias and is in, without writing the lock's line; its unlock clears the slot (the slot is
 * kept in a token). A reader that finds the bias off or its slot taken reads through the
 * phase-fair lock, and turns the bias on when the inhibit time has passed. A writer takes
 * the phase-fair write lock and, if the bias is on, revokes it: turns it off, then waits
 * until no slot of the table holds this lock; the bias then stays off BRAVO_INHIBIT times
 * as long as that took, which bounds the time spent revoking to a tenth. The bias and the
 * slot are a Dekker pair (each side writes one, then reads the other): both seq_cst, so
 * either the reader sees the bias off or the writer sees the reader. All-zero is bias off.
 * Wins: read-mostly locks read by many threads on many cores: fast reads write no shared
 * line. Collapses: writes after a read-biased stretch (a 4096-slot scan, 32 KiB, and a wait
 * for every fast reader), then slow reads only for the inhibit time; slot collisions between
 * (thread, lock) pairs send readers to the slow path. */
#define VISIBLE_SLOTS (1u << VISIBLE_BITS) /* as the paper */
static const void *visible[VISIBLE_SLOTS] __attribute__((aligned(64)));

static const void **visible_slot(const void *o) {
  uint64_t h = ((uint64_t)self() * 0x9E3779B97F4A7C15ull) ^ (uint64_t)(uintptr_t)o;
  return &visible[(h * 0xC2B2AE3D27D4EB4Full) >> (64 - VISIBLE_BITS)];
}

/* The fast path: 1 when this thread reads o through its slot (noted in a token). */
static int bravo_fast(union state *s, const void *o) {
  if (!LOAD(&s->bravo.bias, RELAXED)) return 0;
  const void **slot = visible_slot(o), *none = NULL;
  if (!__atomic_compare_exchange_n(slot, &none, o, 0, SEQ_CST, RELAXED)) return 0;
  if (LOAD(&s->bravo.bias, SEQ_CST) && token_put(o, (void *)slot) == 0) {
    if (profiling) ADD(&((struct rec *)s)->fast_reads, 1); /* the state opens its record */
    return 1;
  }
  STORE(slot, NULL, RELEASE); /* a writer revoked the bias meanwhile */
  return 0;
}

/* REQUIRES: the read lock, so no writer is in and none can be revoking. */
static void bravo_rebias(union state *s) {
  if (!LOAD(&s->bravo.bias, RELAXED) && clock_ns() >= LOAD(&s->bravo.inhibit_until, RELAXED))
    STORE(&s->bravo.bias, 1, RELEASE);
}

/* REQUIRES: the write lock: no slow reader can turn the bias back on meanwhile. */
static void bravo_revoke(union state *s, const void *o) {
  if (!LOAD(&s->bravo.bias, RELAXED)) return;
  STORE(&s->bravo.bias, 0, SEQ_CST);
  uint64_t t0 = clock_ns();
  for (unsigned i = 0; i < VISIBLE_SLOTS; i++)
    for (unsigned n = 0; LOAD(&visible[i], SEQ_CST) == o;) relax(&n);
  uint64_t t1 = clock_ns();
  STORE(&s->bravo.inhibit_until, t1 + (t1 - t0) * BRAVO_INHIBIT, RELAXED);
}

static int bravo_try(union state *s, const void *o, int mode) {
  if (mode == M_READ && bravo_fast(s, o)) return 0;
  if (pf_try(s, o, mode) != 0) return EBUSY;
  if (mode == M_READ)
    bravo_rebias(s);
  else
    bravo_revoke(s, o);
  return 0;
}

static int bravo_lock(union state *s, const void *o, int mode) {
  if (mode == M_READ && bravo_fast(s, o)) return 0;
  pf_lock(s, o, mode);
  if (mode == M_READ)
    bravo_rebias(s);
  else
    bravo_revoke(s, o);
  return 0;
}

/* A token for o: a fast read of this thread; otherwise the phase-fair lock's unlock. */
static int bravo_unlock(union state *s, const void *o) {
  const void **slot = token_take(o);
  if (!slot) return pf_unlock(s, o);
  STORE(slot, NULL, RELEASE); /* a revoking writer reads this: our reads come before it */
  return 0;
}

static const struct algo ALGOS[] = {
    {"ticketlock", ticket_try, ticket_lock, ticket_unlock, NULL, 0},
    {"mcs", mcs_try, mcs_lock, mcs_unlock, NULL, 0},
    {"ttas-backoff", ttas_try, ttas_lock, ttas_unlock, NULL, 0},
    {"pflock", pf_try, pf_lock, pf_unlock, NULL, 1},
    {"clh", clh_try, clh_lock, clh_unlock, NULL, 0},
    {"futex-mutex", futex_try, futex_lock, futex_unlock, futex_timed, 0},
    {"bravo-pflock", bravo_try, bravo_lock, bravo_unlock, NULL, 1},
};
#define PHASE_FAIR (&ALGOS[3])

/* ------------------------------------------------------------------ configuration */

/* The lock called name, or NULL (pthread's), said on stderr when the name is not ours. */
static const struct algo *algo_named(const char *name, const char *var) {
  if (!name || !*name || !strcmp(name, "pthread") || !strcmp(name, "none")) return NULL;
  for (size_t i = 0; i < sizeof ALGOS / sizeof ALGOS[0]; i++)
    if (!strcmp(ALGOS[i].name, name)) return &ALGOS[i];
  if (!strcmp(name, "flat-combining"))
    say(var,
        ": flat combining cannot replace a pthread lock (the critical section is the "
        "caller's own code, which no combiner can run for it); kept pthread's\n");
  else
    say(var, ": unknown lock; kept pthread's\n");
  return NULL;
}

#if defined(__x86_64__)
/* A clock reading and the TSC at that moment (the middle of two reads around it), retried
 * when something came between them. */
static void tsc_pair(uint64_t *tsc, uint64_t *ns) {
  for (int i = 0; i < 16; i++) {
    uint64_t a = __rdtsc();
    *ns = clock_ns();
    uint64_t b = __rdtsc();
    *tsc = a + (b - a) / 2;
    if (b - a < 10000) return;
  }
}

/* The TSC's rate against CLOCK_MONOTONIC over 1 ms, once, in the first call: 1 ms of the
 * program's start for a rate good to some 1e-4 (log2 buckets need far less). */
static void calibrate(void) {
  unsigned a, b, c, d;
  const char *force = getenv("LOCKPROF_CLOCK");
  if ((force && !strcmp(force, "monotonic")) || !__get_cpuid(0x80000007, &a, &b, &c, &d) ||
      !(d & (1u << 8)))
    return;
  uint64_t t0, n0, t1, n1;
  tsc_pair(&t0, &n0);
  do tsc_pair(&t1, &n1);
  while (n1 - n0 < 1000000);
  if (t1 <= t0) return;
  tick_mult = (uint64_t)(((unsigned __int128)(n1 - n0) << 32) / (t1 - t0));
  use_tsc = 1;
}
#else
static void calibrate(void) {}
#endif

static void read_config(void) {
  const char *f = getenv("LOCKPROF_FILE"), *m = getenv("LOCKPROF_SWAP");
  const char *rw = getenv("LOCKPROF_SWAP_RW");
  if (f && *f && strlen(f) < sizeof out_path - 32) {
    strcpy(out_path, f);
    profiling = 1;
    calibrate();
  }
  const struct algo *a = algo_named(m, "lockprof: LOCKPROF_SWAP");
  if (a && a->rw_only) {
    rw_algo = a; /* a rwlock swap alone: mutexes stay pthread's */
  } else {
    mutex_algo = a;
    rw_algo = a ? PHASE_FAIR : NULL;
  }
  if (rw && *rw) rw_algo = algo_named(rw, "lockprof: LOCKPROF_SWAP_RW");
}

/* Read once, by whichever call comes first (a constructor of another library may lock
 * before ours runs); getenv neither locks nor allocates. */
static void configure(void) {
  int st = LOAD(&config_state, ACQUIRE), zero = 0;
  if (st == 2) return;
  if (st == 0 && __atomic_compare_exchange_n(&config_state, &zero, 1, 0, ACQUIRE, RELAXED)) {
    read_config();
    STORE(&config_state, 2, RELEASE);
    return;
  }
  while (LOAD(&config_state, ACQUIRE) != 2) cpu_relax();
}

static int passthrough(void) { return !profiling && !mutex_algo && !rw_algo; }

/* Only what behaves like a plain lock is swapped: glibc's normal and adaptive mutexes,
 * private ones. Recursive, error-checking, robust, priority and process-shared mutexes keep
 * pthread's semantics (their kind is in the public struct __pthread_mutex_s). */
static int mutex_swappable(const void *o) {
  int k = ((const pthread_mutex_t *)o)->__data.__kind;
  int type = k & 3;
  return (type == PTHREAD_MUTEX_NORMAL || type == PTHREAD_MUTEX_ADAPTIVE_NP) && !(k & 0xf0);
}

static const struct algo *algo_for(const void *o, int kind, const struct rec *r) {
  if (!r) return NULL;
  if (kind == K_MUTEX) return mutex_algo && mutex_swappable(o) ? mutex_algo : NULL;
  return rw_algo && !((const pthread_rwlock_t *)o)->__data.__shared ? rw_algo : NULL;
}

/* ------------------------------------------------------------------ the real functions */

/* Resolved on first use; NULL while this thread is inside dlsym, which may call back into a
 * wrapper (through an allocator): a lock is then a no-op (one thread, nothing to exclude).
 * Plain dlsym may hand back the pre-2.3.2 condition variable ABI, hence the version. */
static void *sym(void **slot, const char *name, const char *version) {
  void *p = LOAD(slot, ACQUIRE);
  if (p || resolving) return p;
  resolving = 1;
  if (version) p = dlvsym(RTLD_NEXT, name, version);
  if (!p) p = dlsym(RTLD_NEXT, name);
  resolving = 0;
  STORE(slot, p, RELEASE);
  return p;
}
#define REAL(fn, version)                             \
  static __typeof__(&fn) real_##fn(void) {            \
    static void *slot;                                \
    return (__typeof__(&fn))sym(&slot, #fn, version); \
  }
REAL(pthread_mutex_lock, NULL)
REAL(pthread_mutex_trylock, NULL)
REAL(pthread_mutex_timedlock, NULL)
REAL(pthread_mutex_clocklock, NULL)
REAL(pthread_mutex_unlock, NULL)
REAL(pthread_rwlock_rdlock, NULL)
REAL(pthread_rwlock_wrlock, NULL)
REAL(pthread_rwlock_tryrdlock, NULL)
REAL(pthread_rwlock_trywrlock, NULL)
REAL(pthread_rwlock_timedrdlock, NULL)
REAL(pthread_rwlock_timedwrlock, NULL)
REAL(pthread_rwlock_clockrdlock, NULL)
REAL(pthread_rwlock_clockwrlock, NULL)
REAL(pthread_rwlock_unlock, NULL)
REAL(pthread_cond_wait, "GLIBC_2.3.2")
REAL(pthread_cond_timedwait, "GLIBC_2.3.2")
REAL(pthread_cond_clockwait, NULL)
REAL(pthread_cond_signal, "GLIBC_2.3.2")
REAL(pthread_cond_broadcast, "GLIBC_2.3.2")
REAL(sigaction, NULL)
REAL(signal, NULL)

#define CALL(fn, ...) (real_##fn() ? real_##fn()(__VA_ARGS__) : 0)

/* One acquisition as asked: what, which side, blocking or try or timed (against clk). */
struct req {
  void *o;
  int kind, mode, op, clocked;
  clockid_t clk;
  const struct timespec *abs;
  const void *site;
};

static int real_try(const struct req *q) {
  if (q->kind == K_MUTEX) return CALL(pthread_mutex_trylock, q->o);
  if (q->mode == M_READ) return CALL(pthread_rwlock_tryrdlock, q->o);
  return CALL(pthread_rwlock_trywrlock, q->o);
}

static int real_timed(const struct req *q) {
  if (q->kind == K_MUTEX)
    return q->clocked ? CALL(pthread_mutex_clocklock, q->o, q->clk, q->abs)
                      : CALL(pthread_mutex_timedlock, q->o, q->abs);
  if (q->mode == M_READ)
    return q->clocked ? CALL(pthread_rwlock_clockrdlock, q->o, q->clk, q->abs)
                      : CALL(pthread_rwlock_timedrdlock, q->o, q->abs);
  return q->clocked ? CALL(pthread_rwlock_clockwrlock, q->o, q->clk, q->abs)
                    : CALL(pthread_rwlock_timedwrlock, q->o, q->abs);
}

static int real_block(const struct req *q) {
  if (q->op == OP_TIMED) return real_timed(q);
  if (q->kind == K_MUTEX) return CALL(pthread_mutex_lock, q->o);
  if (q->mode == M_READ) return CALL(pthread_rwlock_rdlock, q->o);
  return CALL(pthread_rwlock_wrlock, q->o);
}

static int real_unlock(void *o, int kind) {
  return kind == K_MUTEX ? CALL(pthread_mutex_unlock, o) : CALL(pthread_rwlock_unlock, o);
}

/* ------------------------------------------------------------------ the per-request trace */

/* For the grader's design check (analysis/grade/design.py reads the trace). A request starts
 * when a thread reads bytes from a socket (read, recv) and ends when the same thread writes
 * to that socket (write, send): one thread per connection and one request per connection, as
 * in the kit. In between, pthread mutex, rwlock and condition variable calls are noted in a
 * fixed per-thread table; at the reply one line is appended to the descriptor $LOCKTRACE_FD
 * or the file $LOCKTRACE_FILE (at most $LOCKTRACE_MAX lines, default 20000):
 *
 *   R <request's first bytes, up to 24, sanitised> <n> <addr>:<kind>[count] ... [+]
 *
 * kind m mutex, r/w rwlock for reading/writing, c condition variable waited on or
 * signalled; M R W: taken while the thread held another traced lock (nesting); count, only
 * above 1: times taken in the request (a hand-made read/write lock takes its mutex on entry
 * and on exit); a final "+": more than TRACE_OBJS objects, the rest not listed.
 *
 * No allocation (the table in TLS, the line on the stack), the line by a raw write(2), one
 * per line on an O_APPEND descriptor (threads never interleave), errno kept. It is not proof
 * against the program, which shares its address space and its file. */
#define TRACE_OBJS 32
#define TRACE_PREFIX 24

struct traced {
  uintptr_t addr;
  unsigned count;
  char kind;
};
static TLS struct {
  int active, fd, n, overflow, held; /* held: traced locks this thread holds now */
  char prefix[TRACE_PREFIX + 1];
  struct traced objs[TRACE_OBJS];
} rq;

static int trace_fd = -1; /* set once, by the constructor: >= 0 is trace mode */

/* Notes object o in this thread's request. */
static void trace_note(const void *o, char kind, int count_held) {
  if (count_held && rq.held++ > 0 && rq.active) kind = (char)(kind - 'a' + 'A');
  if (!rq.active) return;
  for (int i = 0; i < rq.n; i++)
    if (rq.objs[i].addr == (uintptr_t)o && rq.objs[i].kind == kind) {
      rq.objs[i].count++;
      return;
    }
  int i = rq.n; /* read once: a signal handler that locks cannot push it past the table */
  if (i >= TRACE_OBJS) {
    rq.overflow = 1;
    return;
  }
  rq.n = i + 1;
  rq.objs[i] = (struct traced){(uintptr_t)o, 1, kind};
}

/* An acquisition that succeeded, noted after it (the result and errno untouched); inside
 * dlsym, where a lock is a no-op, none is noted. */
static void trace_acquired(const struct req *q) {
  if (resolving) return;
  trace_note(q->o, q->kind == K_MUTEX ? 'm' : q->mode == M_READ ? 'r' : 'w', 1);
}

/* ------------------------------------------------------------------ the lock path */

/* A timed acquisition of a swapped lock: the lock's own, or tries until the deadline (not
 * FIFO). */
static int swap_timed(const struct algo *a, struct rec *r, const struct req *q) {
  if (!ts_valid(q->abs)) return EINVAL;
  if (q->clk != CLOCK_REALTIME && q->clk != CLOCK_MONOTONIC) return EINVAL;
  if (a->timed) return a->timed(&r->s, q->o, q->mode, q->clk, q->abs);
  for (unsigned n = 0;; relax(&n)) {
    int rc = a->try_(&r->s, q->o, q->mode);
    if (rc != EBUSY) return rc;
    if (passed(q->clk, q->abs)) return ETIMEDOUT;
  }
}

static void acquired(struct rec *r, const struct req *q, const struct algo *a, int contended,
                     uint64_t waited) {
  if (!profiling || !r) return;
  note_site(r, q->site);
  if (a) STORE(&r->impl, (uint32_t)(a - ALGOS) + 1, RELAXED);
  if (contended) { /* the uncontended ones are acquisitions minus these (put_hist) */
    ADD(&r->contended, 1);
    hist_add(&r->wait, waited);
  }
  ADD(&r->acq[q->mode], 1);
  hold_begin(q->o, q->kind, r);
}

static int acquire_counted(struct req *q) {
  int e = errno, contended = 0;
  struct rec *r = find(q->o, q->kind);
  const struct algo *a = algo_for(q->o, q->kind, r);
  int rc = a ? a->try_(&r->s, q->o, q->mode) : real_try(q);
  uint64_t waited = 0;
  if (rc == EBUSY && q->op != OP_TRY) {
    uint64_t t0 = now();
    contended = 1;
    rc = !a                  ? real_block(q)
         : q->op == OP_TIMED ? swap_timed(a, r, q)
                             : a->lock(&r->s, q->o, q->mode);
    waited = to_ns(now() - t0);
  }
  if (rc == 0 || rc == EOWNERDEAD) acquired(r, q, a, contended, waited);
  if (rc == EBUSY && r && profiling) ADD(&r->busy, 1);
  errno = e;
  return rc;
}

static int acquire(struct req *q) {
  configure();
  int rc = passthrough() ? (q->op == OP_TRY ? real_try(q) : real_block(q)) : acquire_counted(q);
  if (rc == 0 && trace_fd >= 0) trace_acquired(q);
  return rc;
}

static int release_counted(void *o, int kind) {
  int e = errno;
  struct rec *r = profiling ? hold_end(o, kind, 0) : NULL; /* spares the lookup */
  if (!r) r = find(o, kind);
  const struct algo *a = algo_for(o, kind, r);
  int rc = a ? a->unlock(&r->s, o) : real_unlock(o, kind);
  errno = e;
  return rc;
}

static int release(void *o, int kind) {
  configure();
  int rc = passthrough() ? real_unlock(o, kind) : release_counted(o, kind);
  if (rc == 0 && trace_fd >= 0 && rq.held > 0) rq.held--;
  return rc;
}

#define REQ(o, kind, mode, op) \
  (&(struct req){(void *)(o), kind, mode, op, 0, CLOCK_REALTIME, NULL, __builtin_return_address(0)})
#define TREQ(o, kind, mode, clocked, clk, abs) \
  (&(struct req){(void *)(o), kind, mode, OP_TIMED, clocked, clk, abs, __builtin_return_address(0)})

int pthread_mutex_lock(pthread_mutex_t *m) { return acquire(REQ(m, K_MUTEX, M_MUTEX, OP_LOCK)); }
int pthread_mutex_trylock(pthread_mutex_t *m) { return acquire(REQ(m, K_MUTEX, M_MUTEX, OP_TRY)); }
int pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *t) {
  return acquire(TREQ(m, K_MUTEX, M_MUTEX, 0, CLOCK_REALTIME, t));
}
int pthread_mutex_clocklock(pthread_mutex_t *m, clockid_t c, const struct timespec *t) {
  return acquire(TREQ(m, K_MUTEX, M_MUTEX, 1, c, t));
}
int pthread_mutex_unlock(pthread_mutex_t *m) { return release(m, K_MUTEX); }

int pthread_rwlock_rdlock(pthread_rwlock_t *l) {
  return acquire(REQ(l, K_RWLOCK, M_READ, OP_LOCK));
}
int pthread_rwlock_wrlock(pthread_rwlock_t *l) {
  return acquire(REQ(l, K_RWLOCK, M_WRITE, OP_LOCK));
}
int pthread_rwlock_tryrdlock(pthread_rwlock_t *l) {
  return acquire(REQ(l, K_RWLOCK, M_READ, OP_TRY));
}
int pthread_rwlock_trywrlock(pthread_rwlock_t *l) {
  return acquire(REQ(l, K_RWLOCK, M_WRITE, OP_TRY));
}
int pthread_rwlock_timedrdlock(pthread_rwlock_t *l, const struct timespec *t) {
  return acquire(TREQ(l, K_RWLOCK, M_READ, 0, CLOCK_REALTIME, t));
}
int pthread_rwlock_timedwrlock(pthread_rwlock_t *l, const struct timespec *t) {
  return acquire(TREQ(l, K_RWLOCK, M_WRITE, 0, CLOCK_REALTIME, t));
}
int pthread_rwlock_clockrdlock(pthread_rwlock_t *l, clockid_t c, const struct timespec *t) {
  return acquire(TREQ(l, K_RWLOCK, M_READ, 1, c, t));
}
int pthread_rwlock_clockwrlock(pthread_rwlock_t *l, clockid_t c, const struct timespec *t) {
  return acquire(TREQ(l, K_RWLOCK, M_WRITE, 1, c, t));
}
int pthread_rwlock_unlock(pthread_rwlock_t *l) { return release(l, K_RWLOCK); }

/* ------------------------------------------------------------------ condition variables */

static union state *cond_state(struct rec *cr) { return cr ? &cr->s : &fallback_cond; }

/* A wait on a swapped mutex: the counter is read while the mutex is held, so a signal sent
 * after our unlock changes it and the futex does not sleep. Wake-ups may be spurious, as
 * POSIX allows; one is never lost. */
static int swap_cond_wait(const struct algo *a, struct rec *mr, struct rec *cr, const struct req *q,
                          pthread_mutex_t *m) {
  union state *c = cond_state(cr);
  if (q->op == OP_TIMED &&
      (!ts_valid(q->abs) || (q->clk != CLOCK_REALTIME && q->clk != CLOCK_MONOTONIC)))
    return EINVAL;
  __atomic_fetch_add(&c->cond.waiters, 1, SEQ_CST);
  uint32_t seen = LOAD(&c->cond.seq, SEQ_CST);
  a->unlock(&mr->s, m);
  int rc = futex_wait(&c->cond.seq, seen, q->op == OP_TIMED, q->clk, q->abs);
  __atomic_fetch_sub(&c->cond.waiters, 1, RELAXED);
  a->lock(&mr->s, m, M_MUTEX);
  return rc;
}

static int real_cond_wait(const struct req *q, pthread_mutex_t *m) {
  if (q->op != OP_TIMED) return CALL(pthread_cond_wait, q->o, m);
  if (q->clocked) return CALL(pthread_cond_clockwait, q->o, m, q->clk, q->abs);
  return CALL(pthread_cond_timedwait, q->o, m, q->abs);
}

static void cond_noted(struct rec *cr, const struct req *q, uint64_t ns) {
  if (!profiling || !cr) return;
  note_site(cr, q->site);
  ADD(&cr->acq[q->mode], 1);
  if (q->mode == C_WAIT) hist_add(&cr->wait, ns);
}

/* A wait gives its mutex back and takes it again inside libc: the trace's "held" is
 * unchanged. */
static int cond_wait(struct req *q, pthread_mutex_t *m) {
  configure();
  if (trace_fd >= 0) trace_note(q->o, 'c', 0);
  if (passthrough()) return real_cond_wait(q, m);
  int e = errno;
  struct rec *mr = find(m, K_MUTEX), *cr = find(q->o, K_COND);
  const struct algo *a = algo_for(m, K_MUTEX, mr);
  if (profiling) hold_end(m, K_MUTEX, 1);
  uint64_t t0 = now();
  int rc = a ? swap_cond_wait(a, mr, cr, q, m) : real_cond_wait(q, m);
  cond_noted(cr, q, to_ns(now() - t0));
  if (profiling) hold_resume(m, K_MUTEX);
  errno = e;
  return rc;
}

/* Signals reach both kinds of waiter: ours on the counter, pthread's (a wait on a mutex we
 * did not swap) through the real call, which costs a load when nobody waits there. */
static int cond_signal(struct req *q, int all) {
  configure();
  if (trace_fd >= 0) trace_note(q->o, 'c', 0);
  if (passthrough())
    return all ? CALL(pthread_cond_broadcast, q->o) : CALL(pthread_cond_signal, q->o);
  int e = errno;
  struct rec *cr = find(q->o, K_COND);
  if (mutex_algo) {
    union state *c = cond_state(cr);
    __atomic_fetch_add(&c->cond.seq, 1, SEQ_CST);
    if (LOAD(&c->cond.waiters, SEQ_CST)) futex_wake(&c->cond.seq, all || !cr ? INT_MAX : 1);
  }
  cond_noted(cr, q, 0);
  int rc = all ? CALL(pthread_cond_broadcast, q->o) : CALL(pthread_cond_signal, q->o);
  errno = e;
  return rc;
}

/* pthread_cond_timedwait measures against the clock the condvar was made with: bit 1 of
 * glibc's __wrefs (CLOCK_MONOTONIC when set). */
static clockid_t cond_clock(const pthread_cond_t *c) {
  return LOAD(&c->__data.__wrefs, RELAXED) & 2 ? CLOCK_MONOTONIC : CLOCK_REALTIME;
}

int pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m) {
  return cond_wait(REQ(c, K_COND, C_WAIT, OP_LOCK), m);
}
int pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *t) {
  return cond_wait(TREQ(c, K_COND, C_WAIT, 0, cond_clock(c), t), m);
}
int pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m, clockid_t k,
                           const struct timespec *t) {
  return cond_wait(TREQ(c, K_COND, C_WAIT, 1, k, t), m);
}
int pthread_cond_signal(pthread_cond_t *c) {
  return cond_signal(REQ(c, K_COND, C_SIGNAL, OP_LOCK), 0);
}
int pthread_cond_broadcast(pthread_cond_t *c) {
  return cond_signal(REQ(c, K_COND, C_BROADCAST, OP_LOCK), 1);
}

/* ------------------------------------------------------------------ the dump */

/* Output through a static buffer and raw writes: the dump may run in a signal handler, where
 * malloc and stdio are off limits. */
static struct {
  int fd;
  size_t n;
  char buf[16384];
} out;

static void flush(void) {
  for (size_t at = 0; at < out.n;) {
    long w = syscall(SYS_write, out.fd, out.buf + at, out.n - at);
    if (w <= 0 && errno != EINTR) break;
    if (w > 0) at += (size_t)w;
  }
  out.n = 0;
}

static void put(const char *s) {
  for (; *s; s++) {
    if (out.n == sizeof out.buf) flush();
    out.buf[out.n++] = *s;
  }
}

/* v in decimal, or in hex with 0x; s has room for 24 characters. */
static char *fmt_num(char *s, uint64_t v, unsigned base) {
  char tmp[24], *p = s;
  int k = 0;
  do tmp[k++] = "0123456789abcdef"[v % base];
  while ((v /= base) != 0);
  if (base == 16) *p++ = '0', *p++ = 'x';
  while (k > 0) *p++ = tmp[--k];
  *p = 0;
  return s;
}

static void put_num(uint64_t v, unsigned base) {
  char s[24];
  put(fmt_num(s, v, base));
}

static void put_str(const char *s) { /* a JSON string */
  put("\"");
  for (; s && *s; s++) {
    unsigned char c = (unsigned char)*s;
    char one[7] = {(char)c, 0};
    if (c == '"' || c == '\\') one[0] = '\\', one[1] = (char)c, one[2] = 0;
    if (c < 0x20)
      memcpy(one, "\\u0000", 7), one[4] = (char)('0' + (c >> 4)),
                                 one[5] = "0123456789abcdef"[c & 15];
    put(one);
  }
  put("\"");
}

static void put_key(const char *k) {
  put_str(k);
  put(": ");
}

/* The upper edge of the log2 bucket that holds the p-th permille sample (so within a factor
 * of 2 of the truth), never above the maximum. */
static uint64_t percentile(const uint64_t *c, uint64_t samples, uint64_t max, unsigned permille) {
  uint64_t rank = (samples * permille + 999) / 1000, seen = 0;
  for (unsigned b = 0; b < BUCKETS; b++) {
    seen += c[b];
    if (rank && seen >= rank) {
      uint64_t edge = b ? 1ull << b : 0;
      return edge < max ? edge : max;
    }
  }
  return max;
}

/* A snapshot of h, with `zeros` more samples of 0 ns: the uncontended acquisitions, which
 * the lock path leaves out of the wait histogram to spare an atomic add. */
static void put_hist(const char *name, const struct hist *h, uint64_t zeros) {
  uint64_t c[BUCKETS], samples = 0, max = LOAD(&h->max, RELAXED);
  unsigned last = 0;
  for (unsigned b = 0; b < BUCKETS; b++) {
    c[b] = LOAD(&h->count[b], RELAXED) + (b == 0 ? zeros : 0);
    samples += c[b];
    if (c[b]) last = b + 1;
  }
  put(", ");
  put_key(name);
  put("{\"samples\": "), put_num(samples, 10);
  put(", \"p50\": "), put_num(percentile(c, samples, max, 500), 10);
  put(", \"p99\": "), put_num(percentile(c, samples, max, 990), 10);
  put(", \"max\": "), put_num(max, 10);
  put(", \"total\": "), put_num(LOAD(&h->total, RELAXED), 10);
  put(", \"histogram\": [");
  for (unsigned b = 0; b < last; b++) {
    if (b) put(", ");
    put_num(c[b], 10);
  }
  put("]}");
}

static char exe[PATH_MAX];

static const char *base_name(const char *p) {
  const char *s = strrchr(p, '/');
  return s ? s + 1 : p;
}

/* b[at..] gets s, cut to fit cap; the new end. */
static size_t cat(char *b, size_t cap, size_t at, const char *s) {
  while (*s && at + 1 < cap) b[at++] = *s++;
  b[at] = 0;
  return at;
}

/* "function+0xoff (object)" from dladdr where the object exports a name; otherwise
 * "0xvaddr (object)", and site_object/site_vaddr let the reader look in .symtab. */
static void put_site(uintptr_t ra) {
  Dl_info info;
  struct link_map *map = NULL;
  char site[1024], num[24];
  size_t k = 0;
  if (!ra || !dladdr1((void *)(ra - 1), &info, (void **)&map, RTLD_DL_LINKMAP) || !map) {
    put(", \"site\": \"?\"");
    return;
  }
  const char *obj = map->l_name && map->l_name[0] ? map->l_name : exe; /* "" is the program */
  if (info.dli_sname) {
    k = cat(site, sizeof site - 300, k, info.dli_sname);
    k = cat(site, sizeof site, k, "+");
    k = cat(site, sizeof site, k, fmt_num(num, ra - (uintptr_t)info.dli_saddr, 16));
  } else {
    k = cat(site, sizeof site, k, fmt_num(num, ra - map->l_addr, 16));
  }
  k = cat(site, sizeof site, k, " (");
  k = cat(site, sizeof site, k, base_name(obj));
  cat(site, sizeof site, k, ")");
  put(", \"site\": "), put_str(site);
  put(", \"site_object\": "), put_str(obj);
  put(", \"site_vaddr\": \""), put_num(ra - map->l_addr, 16), put("\"");
}

static const char *KIND_NAMES[] = {"", "mutex", "rwlock", "cond"};
static const char *MODE_NAMES[][3] = {
    {"", "", ""}, {"mutex", "", ""}, {"", "read", "write"}, {"wait", "signal", "broadcast"}};

/* From the record, never from the object: it may be gone by now. */
static const char *impl_of(uintptr_t key, const struct rec *r) {
  uint32_t i = LOAD(&r->impl, RELAXED);
  if ((key & 3) == K_COND) return mutex_algo ? "futex" : "pthread";
  return i ? ALGOS[i - 1].name : "pthread";
}

static void put_record(uintptr_t key, const struct rec *r, int first) {
  int kind = (int)(key & 3);
  put(first ? "\n  {" : ",\n  {");
  put("\"addr\": \""), put_num(key >> 2, 16), put("\", \"kind\": "), put_str(KIND_NAMES[kind]);
  put(", \"impl\": "), put_str(impl_of(key, r));
  put(", \"acquisitions\": {");
  for (int m = 0, n = 0; m < 3; m++) {
    if (!MODE_NAMES[kind][m][0]) continue;
    put(n++ ? ", " : ""), put_key(MODE_NAMES[kind][m]), put_num(LOAD(&r->acq[m], RELAXED), 10);
  }
  put("}, \"contended\": "), put_num(LOAD(&r->contended, RELAXED), 10);
  put(", \"busy\": "), put_num(LOAD(&r->busy, RELAXED), 10);
  if (kind == K_RWLOCK && !strcmp(impl_of(key, r), "bravo-pflock"))
    put(", \"fast_reads\": "), put_num(LOAD(&r->fast_reads, RELAXED), 10);
  if (kind == K_COND) {
    put_hist("wait_ns", &r->wait, 0);
  } else {
    uint64_t n = LOAD(&r->acq[0], RELAXED) + LOAD(&r->acq[1], RELAXED) + LOAD(&r->acq[2], RELAXED);
    uint64_t contended = LOAD(&r->contended, RELAXED);
    put_hist("wait_ns", &r->wait, n > contended ? n - contended : 0);
    put_hist("hold_ns", &r->hold, 0);
  }
  put_site(LOAD(&r->site, RELAXED));
  put("}");
}

static int active(const struct rec *r) {
  return LOAD(&r->acq[0], RELAXED) || LOAD(&r->acq[1], RELAXED) || LOAD(&r->acq[2], RELAXED) ||
         LOAD(&r->busy, RELAXED);
}

static void put_header(const char *reason) {
  long k = syscall(SYS_readlink, "/proc/self/exe", exe, sizeof exe - 1);
  exe[k > 0 ? k : 0] = 0;
  put("{\"tool\": \"lockprof\", \"version\": 1, \"pid\": "), put_num((uint64_t)getpid(), 10);
  put(", \"program\": "), put_str(exe);
  put(", \"reason\": "), put_str(reason);
  put(", \"clock\": "), put_str(use_tsc ? "tsc" : "CLOCK_MONOTONIC");
  put(", \"tsc_ps_per_tick\": "), put_num(use_tsc ? (tick_mult * 1000) >> 32 : 0, 10);
  put(", \"table_size\": "), put_num(TABLE_SIZE, 10);
  put(", \"swap\": {\"mutex\": "), put_str(mutex_algo ? mutex_algo->name : "pthread");
  put(", \"rwlock\": "), put_str(rw_algo ? rw_algo->name : "pthread");
  put("}, \"untracked_ops\": "), put_num(LOAD(&untracked_ops, RELAXED), 10);
  put(", \"holds_lost\": "), put_num(LOAD(&holds_lost, RELAXED), 10);
  put(", \"locks\": [");
}

/* out_path with "%p" made the pid, and the same with ".tmp" added. */
static void paths(char *final, char *tmp) {
  char pid[24], *d = final;
  size_t k = 0;
  uint64_t v = (uint64_t)getpid();
  do pid[k++] = (char)('0' + v % 10);
  while ((v /= 10) != 0);
  for (const char *s = out_path; *s && d < final + PATH_MAX - 32; s++) {
    if (s[0] == '%' && s[1] == 'p') {
      for (size_t i = k; i > 0; i--) *d++ = pid[i - 1];
      s++;
    } else {
      *d++ = *s;
    }
  }
  *d = 0;
  strcpy(tmp, final);
  strcat(tmp, ".tmp");
}

static int dump_state; /* 0 not yet, 1 being written, 2 written */

static void write_dump(const char *reason) {
  static char final[PATH_MAX], tmp[PATH_MAX];
  paths(final, tmp);
  out.fd = (int)syscall(SYS_open, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (out.fd < 0) {
    say("lockprof: cannot write ", tmp), say("", "\n");
    return;
  }
  out.n = 0;
  put_header(reason);
  int first = 1;
  for (uint32_t i = 0; i < TABLE_SIZE; i++) {
    uintptr_t key = LOAD(&keys[i], ACQUIRE);
    if (key && active(&recs[i])) put_record(key, &recs[i], first), first = 0;
  }
  put("\n]}\n");
  flush();
  syscall(SYS_close, out.fd);
  syscall(SYS_rename, tmp, final);
}

/* Once per process; a second caller (a signal during the exit's dump) waits up to 2 s for
 * the first to finish, so the process does not die with the file half written. */
static void dump(const char *reason) {
  int zero = 0;
  if (!profiling) return;
  if (!__atomic_compare_exchange_n(&dump_state, &zero, 1, 0, ACQ_REL, ACQUIRE)) {
    struct timespec t = {0, 10000000};
    for (int i = 0; i < 200 && LOAD(&dump_state, ACQUIRE) != 2; i++)
      syscall(SYS_nanosleep, &t, NULL);
    return;
  }
  write_dump(reason);
  STORE(&dump_state, 2, RELEASE);
}

/* SA_RESETHAND made the action the default again: the raised signal, pending until we
 * return, ends the program as the first one would have. */
static void on_signal(int sig) {
  int e = errno;
  dump(sig == SIGINT ? "SIGINT" : "SIGTERM");
  raise(sig);
  errno = e;
}

/* Only where the program has left the default action: a program with a handler of its own
 * keeps it, and ends through exit (and our destructor) or not at all. */
static void install_handlers(void) {
  static const int sigs[] = {SIGINT, SIGTERM};
  for (int i = 0; i < 2; i++) {
    struct sigaction old, sa;
    if (CALL(sigaction, sigs[i], NULL, &old) != 0 || old.sa_handler != SIG_DFL ||
        (old.sa_flags & SA_SIGINFO))
      continue;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESETHAND | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGINT);
    sigaddset(&sa.sa_mask, SIGTERM);
    CALL(sigaction, sigs[i], &sa, NULL);
  }
}

/* The program sees the default action where ours stands in for it: a program that installs
 * a handler only over the default one (CPython's KeyboardInterrupt, for one) still does. */
static int ours(int sig, void (*h)(int)) {
  return (sig == SIGINT || sig == SIGTERM) && h == on_signal;
}

int sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
  if (!real_sigaction()) {
    errno = ENOSYS;
    return -1;
  }
  int rc = real_sigaction()(sig, act, old);
  if (rc == 0 && old && !(old->sa_flags & SA_SIGINFO) && ours(sig, old->sa_handler)) {
    memset(old, 0, sizeof *old);
    old->sa_handler = SIG_DFL;
  }
  return rc;
}

sighandler_t signal(int sig, sighandler_t h) {
  sighandler_t old = real_signal() ? real_signal()(sig, h) : SIG_ERR;
  return ours(sig, old) ? SIG_DFL : old;
}

/* A forked child starts with the parent's counts; it reports only its own. */
static void child_after_fork(void) {
  for (uint32_t i = 0; i < TABLE_SIZE; i++) {
    if (!LOAD(&keys[i], RELAXED)) continue;
    struct rec *r = &recs[i];
    memset(r->acq, 0, sizeof r->acq);
    r->contended = r->busy = r->fast_reads = 0;
    memset(&r->wait, 0, sizeof r->wait);
    memset(&r->hold, 0, sizeof r->hold);
  }
  untracked_ops = holds_lost = 0;
  dump_state = 0;
}

/* ------------------------------------------------------------------ the trace's lines */

static dev_t trace_dev;
static ino_t trace_ino;
static long trace_max = 20000, trace_lines;

/* $LOCKTRACE_FD, a descriptor the grader opened on a file in a folder the program cannot
 * write (so it cannot delete the file or put another in its place), else $LOCKTRACE_FILE.
 * Either must be a regular file open for writing; it is closed on exec, so a program that
 * re-executes itself without the tracer leaves no trace rather than another one's. */
static int trace_open(void) {
  const char *fdtext = getenv("LOCKTRACE_FD"), *path = getenv("LOCKTRACE_FILE");
  if (fdtext && *fdtext) {
    char *end;
    long v = strtol(fdtext, &end, 10);
    if (*end || v < 0 || v > 1 << 20) return -1;
    int fd = (int)v, fl = fcntl(fd, F_GETFL);
    if (fl < 0 || (fl & O_ACCMODE) == O_RDONLY) return -1;
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    return fd;
  }
  if (!path || !*path) return -1;
  /* O_NONBLOCK: a FIFO put in the file's place must not hang the program at load */
  return open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
}

static void trace_init(void) {
  const char *m = getenv("LOCKTRACE_MAX");
  if (m && *m) trace_max = strtol(m, NULL, 10);
  int fd = trace_open();
  struct stat sb;
  if (fd >= 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode)) {
    trace_dev = sb.st_dev, trace_ino = sb.st_ino, trace_fd = fd;
  } else if (fd >= 0) {
    close(fd);
  }
}

static size_t line_put(char *b, size_t at, const char *s) {
  while (*s) b[at++] = *s++;
  return at;
}

/* The reply left: one line for the request, in one write(2). */
static void trace_emit(void) {
  if (__atomic_add_fetch(&trace_lines, 1, RELAXED) > trace_max) return;
  char line[64 + TRACE_OBJS * 40], num[24];
  size_t at = line_put(line, 0, "R ");
  at = line_put(line, at, rq.prefix[0] ? rq.prefix : "?");
  line[at++] = ' ';
  at = line_put(line, at, fmt_num(num, (uint64_t)rq.n, 10));
  for (int i = 0; i < rq.n; i++) {
    line[at++] = ' ';
    at = line_put(line, at, fmt_num(num, rq.objs[i].addr, 16));
    line[at++] = ':';
    line[at++] = rq.objs[i].kind;
    if (rq.objs[i].count > 1) at = line_put(line, at, fmt_num(num, rq.objs[i].count, 10));
  }
  if (rq.overflow) at = line_put(line, at, " +");
  line[at++] = '\n';
  /* the program may have closed our descriptor and reused its number for a socket */
  struct stat sb;
  if (fstat(trace_fd, &sb) == 0 && sb.st_dev == trace_dev && sb.st_ino == trace_ino)
    syscall(SYS_write, trace_fd, line, at);
}

static void trace_arrived(int fd, const void *buf, ssize_t got) {
  if (got <= 0 || (rq.active && rq.fd == fd)) return; /* more of the same */
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISSOCK(sb.st_mode)) return;
  rq.active = 1, rq.fd = fd, rq.n = 0, rq.overflow = 0;
  const unsigned char *s = buf;
  int k = 0;
  for (; k < TRACE_PREFIX && k < got && s[k]; k++)
    rq.prefix[k] = s[k] > ' ' && s[k] < 0x7f ? (char)s[k] : '_';
  rq.prefix[k] = 0;
}

static void trace_replied(int fd) {
  if (!rq.active || rq.fd != fd) return;
  rq.active = 0;
  trace_emit();
}

REAL(read, NULL)
REAL(recv, NULL)
REAL(write, NULL)
REAL(send, NULL)
REAL(close, NULL)

/* I/O wrappers: outside trace mode a flag check and the real call; before the real
 * functions are known, the raw system call. recv and send are recvfrom and sendto without an
 * address. */
ssize_t read(int fd, void *buf, size_t len) {
  __typeof__(&read) f = real_read();
  ssize_t got = f ? f(fd, buf, len) : syscall(SYS_read, fd, buf, len);
  if (trace_fd >= 0) {
    int e = errno;
    trace_arrived(fd, buf, got);
    errno = e;
  }
  return got;
}

ssize_t recv(int fd, void *buf, size_t len, int flags) {
  __typeof__(&recv) f = real_recv();
  ssize_t got = f ? f(fd, buf, len, flags) : syscall(SYS_recvfrom, fd, buf, len, flags, 0, 0);
  if (trace_fd >= 0 && !(flags & MSG_PEEK)) {
    int e = errno;
    trace_arrived(fd, buf, got);
    errno = e;
  }
  return got;
}

/* _FORTIFY_SOURCE turns read/recv into these; the same check as libc's, then ours. */
extern void __chk_fail(void) __attribute__((noreturn));
ssize_t __read_chk(int fd, void *buf, size_t len, size_t buflen) {
  if (len > buflen) __chk_fail();
  return read(fd, buf, len);
}
ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags) {
  if (len > buflen) __chk_fail();
  return recv(fd, buf, len, flags);
}

/* The line is written before the reply leaves: the client may act on it at once. */
ssize_t write(int fd, const void *buf, size_t len) {
  if (trace_fd >= 0) {
    int e = errno;
    trace_replied(fd);
    errno = e;
  }
  __typeof__(&write) f = real_write();
  return f ? f(fd, buf, len) : syscall(SYS_write, fd, buf, len);
}

ssize_t send(int fd, const void *buf, size_t len, int flags) {
  if (trace_fd >= 0) {
    int e = errno;
    trace_replied(fd);
    errno = e;
  }
  __typeof__(&send) f = real_send();
  return f ? f(fd, buf, len, flags) : syscall(SYS_sendto, fd, buf, len, flags, 0, 0);
}

/* A request dropped without a reply must not run into the next one on a reused fd. */
int close(int fd) {
  if (rq.active && rq.fd == fd) rq.active = 0;
  __typeof__(&close) f = real_close();
  return f ? f(fd) : (int)syscall(SYS_close, fd);
}

__attribute__((constructor)) static void lockprof_init(void) {
  configure();
  trace_init();
  if (!profiling) return;
  install_handlers();
  pthread_atfork(NULL, NULL, child_after_fork);
}

__attribute__((destructor)) static void lockprof_fini(void) { dump("exit"); }
