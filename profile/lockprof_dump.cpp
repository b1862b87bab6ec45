// The profile's dump: one JSON document per process (the lock records; the contended stacks
// and the timeline when asked for, lockprof_stacks.cpp), written once, at exit (a
// destructor) or on SIGINT/SIGTERM (a handler of ours, installed only where the program left
// the default action; it dumps, then the signal kills as it would have), to $LOCKPROF_FILE
// ("%p" there becomes the pid: a forked child writes its own) under a temporary name, then
// renamed, so a reader sees all of it or nothing. Through a static buffer and raw writes:
// the dump may run in a signal handler, where malloc and stdio are off limits.
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>

#include "profile/lockprof.h"

namespace lockprof {

// v in decimal, or in hex with 0x (the dump's, the trace's and the stacks' numbers).
char* FormatNumber(char* s, uint64_t v, unsigned base) {
  char tmp[24];
  char* p = s;
  int k = 0;
  do tmp[k++] = "0123456789abcdef"[v % base];
  while ((v /= base) != 0);
  if (base == 16) *p++ = '0', *p++ = 'x';
  while (k > 0) *p++ = tmp[--k];
  *p = 0;
  return s;
}
namespace {

LOCKPROF_REAL(sigaction, nullptr)
LOCKPROF_REAL(signal, nullptr)

struct Out {
  int fd;
  size_t n;
  char buf[16384];
};
Out g_out;

void Flush();

}  // namespace

void Put(const char* s) {
  for (; *s != 0; s++) {
    if (g_out.n == sizeof g_out.buf) Flush();
    g_out.buf[g_out.n++] = *s;
  }
}

void PutNum(uint64_t v, unsigned base) {
  char s[24];
  Put(FormatNumber(s, v, base));
}

void PutStr(const char* s) {  // a JSON string
  Put("\"");
  for (; s != nullptr && *s != 0; s++) {
    const auto c = static_cast<unsigned char>(*s);
    char one[7] = {static_cast<char>(c), 0};
    if (c == '"' || c == '\\') one[0] = '\\', one[1] = static_cast<char>(c), one[2] = 0;
    if (c < 0x20) {
      memcpy(one, "\\u0000", 7);
      one[4] = static_cast<char>('0' + (c >> 4));
      one[5] = "0123456789abcdef"[c & 15];
    }
    Put(one);
  }
  Put("\"");
}

void PutKey(const char* k) {
  PutStr(k);
  Put(": ");
}

namespace {

void Flush() {
  for (size_t at = 0; at < g_out.n;) {
    const long w = syscall(SYS_write, g_out.fd, g_out.buf + at, g_out.n - at);
    if (w <= 0 && errno != EINTR) break;
    if (w > 0) at += static_cast<size_t>(w);
  }
  g_out.n = 0;
}

// The upper edge of the log2 bucket that holds the p-th permille sample (so within a factor
// of 2 of the truth), never above the maximum.
uint64_t Percentile(const uint64_t* c, uint64_t samples, uint64_t max, unsigned permille) {
  const uint64_t rank = (samples * permille + 999) / 1000;
  uint64_t seen = 0;
  for (unsigned b = 0; b < kBuckets; b++) {
    seen += c[b];
    if (rank != 0 && seen >= rank) {
      const uint64_t edge = b != 0 ? 1ull << b : 0;
      return edge < max ? edge : max;
    }
  }
  return max;
}

// A snapshot of h, with `zeros` more samples of 0 ns: the uncontended acquisitions, which
// the lock path leaves out of the wait histogram to spare an atomic add.
void PutHist(const char* name, const Hist* h, uint64_t zeros) {
  uint64_t c[kBuckets] = {};
  uint64_t samples = 0;
  const uint64_t max = AtomicLoad(&h->max);
  unsigned last = 0;
  for (unsigned b = 0; b < kBuckets; b++) {
    c[b] = AtomicLoad(&h->count[b]) + (b == 0 ? zeros : 0);
    samples += c[b];
    if (c[b] != 0) last = b + 1;
  }
  Put(", ");
  PutKey(name);
  Put("{\"samples\": "), PutNum(samples, 10);
  Put(", \"p50\": "), PutNum(Percentile(c, samples, max, 500), 10);
  Put(", \"p99\": "), PutNum(Percentile(c, samples, max, 990), 10);
  Put(", \"max\": "), PutNum(max, 10);
  Put(", \"total\": "), PutNum(AtomicLoad(&h->total), 10);
  Put(", \"histogram\": [");
  for (unsigned b = 0; b < last; b++) {
    if (b != 0) Put(", ");
    PutNum(c[b], 10);
  }
  Put("]}");
}

char g_exe[PATH_MAX];

}  // namespace

const char* ExePath() { return g_exe; }

namespace {

const char* BaseName(const char* p) {
  const char* s = strrchr(p, '/');
  return s != nullptr ? s + 1 : p;
}

// b[at..] gets s, cut to fit cap; the new end.
size_t Cat(char* b, size_t cap, size_t at, const char* s) {
  while (*s != 0 && at + 1 < cap) b[at++] = *s++;
  b[at] = 0;
  return at;
}

// "function+0xoff (object)" from dladdr where the object exports a name; otherwise
// "0xvaddr (object)", and site_object/site_vaddr let the reader look in .symtab.
void PutSite(uintptr_t ra) {
  Dl_info info;
  link_map* map = nullptr;
  char site[1024];
  char num[24] = {};
  size_t k = 0;
  if (ra == 0 ||
      // NOLINTNEXTLINE(performance-no-int-to-ptr): a return address, from the program
      dladdr1(reinterpret_cast<void*>(ra - 1), &info, reinterpret_cast<void**>(&map),
              RTLD_DL_LINKMAP) == 0 ||
      map == nullptr) {
    Put(", \"site\": \"?\"");
    return;
  }
  const char* obj = map->l_name != nullptr && map->l_name[0] != 0 ? map->l_name : g_exe;
  if (info.dli_sname != nullptr) {
    k = Cat(site, sizeof site - 300, k, info.dli_sname);
    k = Cat(site, sizeof site, k, "+");
    k = Cat(site, sizeof site, k,
            FormatNumber(num, ra - reinterpret_cast<uintptr_t>(info.dli_saddr), 16));
  } else {
    k = Cat(site, sizeof site, k, FormatNumber(num, ra - map->l_addr, 16));
  }
  k = Cat(site, sizeof site, k, " (");
  k = Cat(site, sizeof site, k, BaseName(obj));
  Cat(site, sizeof site, k, ")");
  Put(", \"site\": "), PutStr(site);
  Put(", \"site_object\": "), PutStr(obj);
  Put(", \"site_vaddr\": \""), PutNum(ra - map->l_addr, 16), Put("\"");
}

constexpr const char* kKindNames[] = {"", "mutex", "rwlock", "cond"};
constexpr const char* kModeNames[][3] = {
    {"", "", ""}, {"mutex", "", ""}, {"", "read", "write"}, {"wait", "signal", "broadcast"}};

void PutAcquisitions(int kind, const Rec* r) {
  Put(", \"acquisitions\": {");
  for (int m = 0, n = 0; m < 3; m++) {
    if (kModeNames[kind][m][0] == 0) continue;
    Put(n++ != 0 ? ", " : "");
    PutKey(kModeNames[kind][m]);
    PutNum(AtomicLoad(&r->acq[m]), 10);
  }
  Put("}");
}

void PutRecord(uintptr_t key, const Rec* r, bool first) {
  const int kind = static_cast<int>(key & 3);
  Put(first ? "\n  {" : ",\n  {");
  Put("\"addr\": \""), PutNum(key >> 2, 16), Put("\", \"kind\": "), PutStr(kKindNames[kind]);
  Put(", \"impl\": "), PutStr(ImplName(key, r));
  PutAcquisitions(kind, r);
  Put(", \"contended\": "), PutNum(AtomicLoad(&r->contended), 10);
  Put(", \"busy\": "), PutNum(AtomicLoad(&r->busy), 10);
  if (kind == kRwlock && strcmp(ImplName(key, r), "bravo-pflock") == 0)
    Put(", \"fast_reads\": "), PutNum(AtomicLoad(&r->fast_reads), 10);
  if (kind == kCond) {
    PutHist("wait_ns", &r->wait, 0);
  } else {
    const uint64_t n = AtomicLoad(&r->acq[0]) + AtomicLoad(&r->acq[1]) + AtomicLoad(&r->acq[2]);
    const uint64_t contended = AtomicLoad(&r->contended);
    PutHist("wait_ns", &r->wait, n > contended ? n - contended : 0);
    PutHist("hold_ns", &r->hold, 0);
  }
  PutSite(__atomic_load_n(&r->site, __ATOMIC_RELAXED));
  Put("}");
}

bool Active(const Rec* r) {
  return AtomicLoad(&r->acq[0]) != 0 || AtomicLoad(&r->acq[1]) != 0 ||
         AtomicLoad(&r->acq[2]) != 0 || AtomicLoad(&r->busy) != 0;
}

void PutHeader(const char* reason) {
  const long k = syscall(SYS_readlink, "/proc/self/exe", g_exe, sizeof g_exe - 1);
  g_exe[k > 0 ? k : 0] = 0;
  Put("{\"tool\": \"lockprof\", \"version\": 1, \"pid\": "), PutNum(getpid(), 10);
  Put(", \"program\": "), PutStr(g_exe);
  Put(", \"reason\": "), PutStr(reason);
  Put(", \"clock\": "), PutStr(g_use_tsc ? "tsc" : "CLOCK_MONOTONIC");
  Put(", \"tsc_ps_per_tick\": "), PutNum(g_use_tsc ? (g_tick_mult * 1000) >> 32 : 0, 10);
  Put(", \"table_size\": "), PutNum(kTableSize, 10);
  Put(", \"hold_sample\": "), PutNum(HoldSample(), 10);
  Put(", \"swap\": {\"mutex\": "), PutStr(MutexSwapName());
  Put(", \"rwlock\": "), PutStr(RwlockSwapName());
  Put("}, \"untracked_ops\": "), PutNum(AtomicLoad(&g_untracked_ops), 10);
  Put(", \"holds_lost\": "), PutNum(AtomicLoad(&g_holds_lost), 10);
  Put(", \"locks\": [");
}

// g_out_path with "%p" made the pid, and the same with ".tmp" added.
void Paths(char* final_path, char* tmp) {
  char pid[24];
  char* d = final_path;
  size_t k = 0;
  uint64_t v = static_cast<uint64_t>(getpid());
  do pid[k++] = static_cast<char>('0' + v % 10);
  while ((v /= 10) != 0);
  for (const char* s = g_out_path; *s != 0 && d < final_path + PATH_MAX - 32; s++) {
    if (s[0] == '%' && s[1] == 'p') {
      for (size_t i = k; i > 0; i--) *d++ = pid[i - 1];
      s++;
    } else {
      *d++ = *s;
    }
  }
  *d = 0;
  const size_t n = static_cast<size_t>(d - final_path);  // at most PATH_MAX - 32
  memcpy(tmp, final_path, n);
  memcpy(tmp + n, ".tmp", 5);
}

int g_dump_state;  // 0 not yet, 1 being written, 2 written

void WriteDump(const char* reason) {
  static char final_path[PATH_MAX], tmp[PATH_MAX];
  Paths(final_path, tmp);
  g_out.fd = static_cast<int>(
      syscall(SYS_open, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (g_out.fd < 0) {
    Say("lockprof: cannot write ", tmp), Say("", "\n");
    return;
  }
  g_out.n = 0;
  PutHeader(reason);
  bool first = true;
  for (uint32_t i = 0; i < kTableSize; i++) {
    const uintptr_t key = __atomic_load_n(&g_keys[i], __ATOMIC_ACQUIRE);
    if (key != 0 && Active(&g_recs[i])) PutRecord(key, &g_recs[i], first), first = false;
  }
  Put("\n]");
  PutStacks();
  PutTimeline();
  Put("}\n");
  Flush();
  syscall(SYS_close, g_out.fd);
  syscall(SYS_rename, tmp, final_path);
}

// SA_RESETHAND made the action the default again: the raised signal, pending until we
// return, ends the program as the first one would have.
void OnSignal(int sig) {
  const int saved = errno;
  Dump(sig == SIGINT ? "SIGINT" : "SIGTERM");
  raise(sig);
  errno = saved;
}

int CallSigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  return real_sigaction() != nullptr ? real_sigaction()(sig, act, old) : -1;
}

// The program sees the default action where ours stands in for it: a program that installs
// a handler only over the default one (CPython's KeyboardInterrupt, for one) still does.
bool Ours(int sig, void (*h)(int)) { return (sig == SIGINT || sig == SIGTERM) && h == OnSignal; }

}  // namespace

// Once per process; a second caller (a signal during the exit's dump) waits up to 2 s for
// the first to finish, so the process does not die with the file half written.
void Dump(const char* reason) {
  int zero = 0;
  if (!g_profiling) return;
  if (!__atomic_compare_exchange_n(&g_dump_state, &zero, 1, false, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE)) {
    timespec t = {0, 10000000};
    for (int i = 0; i < 200 && __atomic_load_n(&g_dump_state, __ATOMIC_ACQUIRE) != 2; i++)
      syscall(SYS_nanosleep, &t, nullptr);
    return;
  }
  WriteDump(reason);
  __atomic_store_n(&g_dump_state, 2, __ATOMIC_RELEASE);
}

// Only where the program has left the default action: a program with a handler of its own
// keeps it, and ends through exit (and our destructor) or not at all.
void InstallSignalHandlers() {
  static constexpr int kSignals[] = {SIGINT, SIGTERM};
  for (const int sig : kSignals) {
    struct sigaction old, sa;
    if (CallSigaction(sig, nullptr, &old) != 0 || old.sa_handler != SIG_DFL ||
        (old.sa_flags & SA_SIGINFO) != 0)
      continue;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = OnSignal;
    sa.sa_flags = SA_RESETHAND | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGINT);
    sigaddset(&sa.sa_mask, SIGTERM);
    CallSigaction(sig, &sa, nullptr);
  }
}

// A forked child starts with the parent's counts; it reports only its own.
void ChildAfterFork() {
  for (uint32_t i = 0; i < kTableSize; i++) {
    if (__atomic_load_n(&g_keys[i], __ATOMIC_RELAXED) == 0) continue;
    Rec* const r = &g_recs[i];
    memset(r->acq, 0, sizeof r->acq);
    r->contended = r->busy = r->fast_reads = 0;
    memset(&r->wait, 0, sizeof r->wait);
    memset(&r->hold, 0, sizeof r->hold);
  }
  g_untracked_ops = g_holds_lost = 0;
  StacksAfterFork();
  g_dump_state = 0;
}

}  // namespace lockprof

LOCKPROF_EXPORT int sigaction(int sig, const struct sigaction* act,
                              struct sigaction* old) noexcept {
  if (lockprof::real_sigaction() == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  const int rc = lockprof::real_sigaction()(sig, act, old);
  if (rc == 0 && old != nullptr && (old->sa_flags & SA_SIGINFO) == 0 &&
      lockprof::Ours(sig, old->sa_handler)) {
    memset(old, 0, sizeof *old);
    old->sa_handler = SIG_DFL;
  }
  return rc;
}

LOCKPROF_EXPORT sighandler_t signal(int sig, sighandler_t h) noexcept {
  const sighandler_t old =
      lockprof::real_signal() != nullptr ? lockprof::real_signal()(sig, h) : SIG_ERR;
  return lockprof::Ours(sig, old) ? SIG_DFL : old;
}
