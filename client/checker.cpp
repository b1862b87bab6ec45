#include "client/checker.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <cstdio>
#include <functional>
#include <latch>
#include <random>
#include <thread>
#include <unordered_map>

#include "common/clock.h"
#include "common/mutex.h"
#include "common/thread_annotations.h"
#include "common/protocol.h"
#include "common/string_array.h"

namespace kv {
namespace {

constexpr uint32_t kMaxWriters = 64;
constexpr std::size_t kMaxViolationsKept = 8;
constexpr uint64_t kMaxSweepPositions = 1024;
constexpr uint32_t kSweepThreads = 4;
constexpr uint32_t kMaxRywThreads = 8;
constexpr int kPoolSize = 4;

uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

constexpr char kAlnum[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

// Longest text that fits in a write request for position `pos`:
// "pos-0-" + text + NUL <= 100 bytes.
std::size_t Room(uint64_t pos) { return kMaxTextLen - (std::to_string(pos).size() + 3); }

std::string Quote(std::string_view s) {
  std::string quoted(1, '\'');  // appended: GCC 12 -Wrestrict misfires on "lit" + string&&
  quoted += Sanitize(s, 100);
  quoted += '\'';
  return quoted;
}

// State shared by all checker threads of a run.
struct Shared {
  const CheckConfig* cfg = nullptr;
  std::vector<uint64_t> positions;                     // the positions the check touches
  std::unordered_map<uint64_t, std::string> baseline;  // read-only after phase 0
  std::vector<uint64_t> attack_positions;
  std::array<std::string, kPoolSize> pool;
  // Highest count each writer has announced before sending it ('R', 'P').
  std::array<std::atomic<uint64_t>, kMaxWriters> published_r{};
  std::array<std::atomic<uint64_t>, kMaxWriters> published_p{};

  Mutex mu;  // guards *result (off the request path: only merges/reports)
  CheckResult* result PT_GUARDED_BY(mu) = nullptr;
  // No request starts after this (monotonic ns); set before any thread runs.
  int64_t deadline_ns = INT64_MAX;

  bool IsAttackPosition(uint64_t pos) const {
    return std::find(attack_positions.begin(), attack_positions.end(), pos) !=
           attack_positions.end();
  }
  bool InPool(std::string_view text) const {
    return std::find(pool.begin(), pool.end(), text) != pool.end();
  }

  // The global rule: is `text` a value position `pos` may hold right now?
  bool Allowed(uint64_t pos, std::string_view text) const {
    auto it = baseline.find(pos);
    if (it != baseline.end() && it->second == text) return true;
    if (text == StringArray::InitialValue(pos)) return true;
    if (IsAttackPosition(pos) && InPool(text)) return true;
    char tag;
    uint32_t writer;
    uint64_t count;
    if (!ParseCheckerValue(text, pos, &tag, &writer, &count)) return false;
    if (writer >= kMaxWriters) return false;
    const auto& published = tag == 'R' ? published_r : published_p;
    if (count > published[writer].load(std::memory_order_acquire)) return false;
    return text == CheckerValue(tag, pos, writer, count, Room(pos));
  }

  std::string DescribeAllowed(uint64_t pos) const {
    std::string d = "the value before the check";
    auto it = baseline.find(pos);
    if (it != baseline.end()) {
      d += ' ';
      d += Quote(it->second);
    }
    d += ", the initial value ";
    d += Quote(StringArray::InitialValue(pos));
    if (IsAttackPosition(pos)) {
      d += ", one of the pool strings";
      for (const auto& p : pool) {
        d += ' ';
        d += Quote(p);
      }
    }
    d += ", or exactly a value the checker sent to position " + std::to_string(pos) + " (e.g. " +
         Quote(CheckerValue('P', pos, 0, 1, Room(pos))) + ")";
    return d;
  }

  void AddViolation(const char* phase, uint64_t pos, std::string_view read, std::string allowed)
      EXCLUDES(mu) {
    MutexLock guard(&mu);
    ++result->violations_total;
    if (result->violations.size() < kMaxViolationsKept) {
      result->violations.push_back(Violation{phase, pos, Sanitize(read, 100), std::move(allowed)});
    }
  }
};

constexpr uint64_t kFailingAfter = 5;  // errors before a session gives up

// One checker thread's connection and counters.
class Session {
 public:
  Session(Shared* shared) : shared_(shared) {}
  ~Session() {
    // A kept connection ends as a per-request one does: nothing may follow
    // its last reply.
    Count(
        conn_.CloseAfterReply(GraceMs()),
        std::string("long_reply after the last reply of a kept connection: ") + kLongReplyMeaning);
    Flush();
  }

  // Sends one request; on success stores the reply text in *reply and
  // returns true. On failure counts an I/O error and returns false.
  bool Exchange(uint64_t pos, bool is_read, std::string_view text, std::string* reply) {
    const CheckConfig& cfg = *shared_->cfg;
    FillRequestFrame(pos, is_read, text, &request_);
    const int64_t now = MonotonicNanos();
    if (now >= shared_->deadline_ns) {
      // Out of time: fail this and every later request of this session.
      io_errors_ = std::max<uint64_t>(io_errors_ + 1, kFailingAfter);
      if (first_error_.empty()) first_error_ = "time limit reached";
      return false;
    }
    std::string detail;
    const ErrorKind kind = Request(cfg, now, &detail);
    if (!Count(kind, detail)) return false;
    ++checked_;
    *reply = std::string(FrameText(std::string_view(conn_.last().reply().data(), kFrameSize)));
    return true;
  }

  // Checks a reply against the global rule; reports a violation if needed.
  bool CheckAllowed(const char* phase, uint64_t pos, const std::string& reply) {
    if (shared_->Allowed(pos, reply)) return true;
    shared_->AddViolation(phase, pos, reply, shared_->DescribeAllowed(pos));
    return false;
  }

  // Stop early when the server stopped answering: one thread's worth of
  // errors is enough to say so.
  bool failing() const { return io_errors_ >= kFailingAfter; }

 private:
  // request_ on conn_ at `now` (connected first if need be), ended at once unless
  // keep-alive, so that bytes after the reply count; the outcome, and in
  // *detail the connect error or the exchange's description of a failure.
  ErrorKind Request(const CheckConfig& cfg, int64_t now, std::string* detail) {
    int64_t start = now;
    if (!conn_.is_open()) {
      Status why;
      const ErrorKind kind = conn_.Connect(cfg.endpoint, cfg.timeout_ms, &why, cfg.keepalive);
      if (kind != ErrorKind::kNone) {
        *detail = why.message();
        return kind;
      }
      ++connected_;
      start = MonotonicNanos();
    }
    conn_.RoundTrip(request_, start + int64_t{cfg.timeout_ms} * 1'000'000);
    if (!cfg.keepalive) conn_.CloseAfterReply(GraceMs());
    const ErrorKind kind = conn_.last().outcome();  // bytes after the reply made it long
    if (kind != ErrorKind::kNone) *detail = conn_.last().Describe();
    return kind;
  }

  // The wait for the server's end of stream (see lab_connection.h).
  int GraceMs() const { return std::min(shared_->cfg->timeout_ms, kEndOfStreamGraceMs); }

  // Counts a failed request (false) or lets a good one through (true).
  bool Count(ErrorKind kind, const std::string& detail) {
    if (kind == ErrorKind::kNone) return true;
    ++io_errors_;
    if (first_error_.empty()) first_error_ = detail;
    return false;
  }

  void Flush() EXCLUDES(shared_->mu) {
    MutexLock guard(&shared_->mu);
    shared_->result->replies_checked += checked_;
    shared_->result->io_errors += io_errors_;
    shared_->result->connected += connected_;
    if (shared_->result->first_io_error.empty()) {
      shared_->result->first_io_error = first_error_;
    }
  }

  Shared* shared_;
  LabConnection conn_;
  Frame request_{};
  uint64_t checked_ = 0;
  uint64_t io_errors_ = 0;
  uint64_t connected_ = 0;
  std::string first_error_;
};

// Runs fn(0..count-1) on `count` threads that start together.
void RunThreads(uint32_t count, const std::function<void(uint32_t)>& fn) {
  std::latch start(count);
  std::vector<std::thread> threads;
  threads.reserve(count);
  for (uint32_t t = 0; t < count; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      fn(t);
    });
  }
  for (auto& th : threads) th.join();
}

void ReadBaselines(Shared* s) {
  const uint32_t nthreads = static_cast<uint32_t>(std::min<std::size_t>(8, s->positions.size()));
  std::vector<std::vector<std::pair<uint64_t, std::string>>> found(nthreads);
  RunThreads(nthreads, [&](uint32_t t) {
    Session session(s);
    for (std::size_t i = t; i < s->positions.size(); i += nthreads) {
      std::string reply;
      if (!session.Exchange(s->positions[i], true, "", &reply)) {
        if (session.failing()) return;
        continue;
      }
      found[t].emplace_back(s->positions[i], std::move(reply));
    }
  });
  MutexLock guard(&s->mu);  // the threads are done; the lock is for the analysis
  for (auto& v : found) {
    for (auto& [pos, text] : v) {
      if (text != StringArray::InitialValue(pos)) ++s->result->non_initial_baselines;
      s->baseline.emplace(pos, std::move(text));
    }
  }
}

void AttackPhase(Shared* s) {
  const CheckConfig& cfg = *s->cfg;
  const uint32_t per_position = 8;  // 7 writers + 1 reader, as the kit
  const uint32_t nthreads = per_position * static_cast<uint32_t>(s->attack_positions.size());
  RunThreads(nthreads, [&](uint32_t t) {
    const uint64_t pos = s->attack_positions[t / per_position];
    const bool reader = t % per_position == 0;
    std::mt19937_64 rng(cfg.seed * 1000003 + t);
    Session session(s);
    bool seen_pool = false;
    std::string reply;
    for (uint32_t k = 0; k < cfg.attack_requests; ++k) {
      if (reader) {
        if (!session.Exchange(pos, true, "", &reply)) {
          if (session.failing()) return;
          continue;
        }
        const bool in_pool = s->InPool(reply);
        if (seen_pool && !in_pool) {
          std::string allowed = "one of the pool strings (a pool string was already read here):";
          for (const auto& p : s->pool) {
            allowed += ' ';
            allowed += Quote(p);
          }
          s->AddViolation("attacker", pos, reply, allowed);
          return;
        }
        seen_pool = seen_pool || in_pool;
        if (!session.CheckAllowed("attacker", pos, reply)) return;
      } else {
        const std::string& value = s->pool[rng() % kPoolSize];
        if (!session.Exchange(pos, false, value, &reply)) {
          if (session.failing()) return;
          continue;
        }
        if (!session.CheckAllowed("attacker", pos, reply)) return;
      }
    }
  });
}

void ReadYourWritesPhase(Shared* s) {
  const CheckConfig& cfg = *s->cfg;
  const uint32_t nthreads =
      static_cast<uint32_t>(std::min<std::size_t>(kMaxRywThreads, s->positions.size()));
  RunThreads(nthreads, [&](uint32_t t) {
    std::vector<uint64_t> own;
    for (std::size_t i = t; i < s->positions.size(); i += nthreads) {
      own.push_back(s->positions[i]);
    }
    Session session(s);
    std::string reply;
    for (uint64_t k = 1; k <= cfg.ryw_requests; ++k) {
      const uint64_t pos = own[k % own.size()];
      const std::string value = CheckerValue('R', pos, t, k, Room(pos));
      s->published_r[t].store(k, std::memory_order_release);
      if (!session.Exchange(pos, false, value, &reply)) {
        if (session.failing()) return;
        continue;
      }
      const std::string allowed =
          "exactly the value this thread just wrote (no other thread writes "
          "this position): " +
          Quote(value);
      if (reply != value) {
        s->AddViolation("read-your-writes (write reply)", pos, reply, allowed);
        return;
      }
      if (!session.Exchange(pos, true, "", &reply)) {
        if (session.failing()) return;
        continue;
      }
      if (reply != value) {
        s->AddViolation("read-your-writes", pos, reply, allowed);
        return;
      }
    }
  });
}

void SweepPhase(Shared* s) {
  const CheckConfig& cfg = *s->cfg;
  RunThreads(kSweepThreads, [&](uint32_t t) {
    std::mt19937_64 rng(cfg.seed * 7919 + 100 + t);
    std::vector<uint64_t> order = s->positions;
    std::shuffle(order.begin(), order.end(), rng);
    Session session(s);
    std::string reply;
    uint64_t count = 0;
    for (uint64_t pos : order) {
      ++count;
      const std::string value = CheckerValue('P', pos, t, count, Room(pos));
      s->published_p[t].store(count, std::memory_order_release);
      if (!session.Exchange(pos, false, value, &reply)) {
        if (session.failing()) return;
        continue;
      }
      if (!session.CheckAllowed("all-positions (write reply)", pos, reply)) return;
      const uint64_t q = s->positions[rng() % s->positions.size()];
      if (!session.Exchange(q, true, "", &reply)) {
        if (session.failing()) return;
        continue;
      }
      if (!session.CheckAllowed("all-positions", q, reply)) return;
    }
  });
}

}  // namespace

std::string CheckerValue(char tag, uint64_t pos, uint32_t writer, uint64_t count, std::size_t len) {
  char head[64];
  const int h = std::snprintf(head, sizeof head, "%c%llu.w%u.c%llu:", tag,
                              static_cast<unsigned long long>(pos), writer,
                              static_cast<unsigned long long>(count));
  std::string v(head, static_cast<std::size_t>(h));
  uint64_t state =
      Mix(static_cast<uint64_t>(tag) * 0x100000001b3ULL ^ Mix(pos ^ Mix(writer ^ Mix(count))));
  while (v.size() < len) {
    state = Mix(state);
    v += kAlnum[state % (sizeof kAlnum - 1)];
  }
  v.resize(std::min(v.size(), len));
  return v;
}

bool ParseCheckerValue(std::string_view text, uint64_t pos, char* tag, uint32_t* writer,
                       uint64_t* count) {
  if (text.empty() || (text[0] != 'R' && text[0] != 'P')) return false;
  *tag = text[0];
  const char* p = text.data() + 1;
  const char* end = text.data() + text.size();
  uint64_t got_pos;
  auto r1 = std::from_chars(p, end, got_pos);
  if (r1.ec != std::errc() || got_pos != pos || r1.ptr + 2 > end || r1.ptr[0] != '.' ||
      r1.ptr[1] != 'w') {
    return false;
  }
  auto r2 = std::from_chars(r1.ptr + 2, end, *writer);
  if (r2.ec != std::errc() || r2.ptr + 2 > end || r2.ptr[0] != '.' || r2.ptr[1] != 'c') {
    return false;
  }
  auto r3 = std::from_chars(r2.ptr + 2, end, *count);
  return r3.ec == std::errc() && r3.ptr < end && *r3.ptr == ':';
}

namespace {

// The attacker's positions (0, n/4, 2n/4, 3n/4, deduplicated) and the
// positions every phase touches: all of them up to kMaxSweepPositions, else
// a random sample that includes the attacker's.
void ChoosePositions(std::mt19937_64* rng, Shared* s) {
  const uint64_t n = s->cfg->n;
  for (uint64_t q : {uint64_t{0}, n / 4, 2 * n / 4, 3 * n / 4}) {
    if (!s->IsAttackPosition(q)) s->attack_positions.push_back(q);
  }
  if (n <= kMaxSweepPositions) {
    for (uint64_t p = 0; p < n; ++p) s->positions.push_back(p);
    return;
  }
  std::vector<uint64_t> sample = s->attack_positions;
  while (sample.size() < kMaxSweepPositions) {
    const uint64_t p = (*rng)() % n;
    if (std::find(sample.begin(), sample.end(), p) == sample.end()) sample.push_back(p);
  }
  std::sort(sample.begin(), sample.end());
  s->positions = std::move(sample);
}

// 4 random alphanumeric strings as long as every attack position allows
// (about 95 - log10 n characters, as the kit).
void MakePool(std::mt19937_64* rng, Shared* s) {
  const std::size_t pool_len = Room(s->cfg->n - 1);
  for (auto& p : s->pool) {
    p.clear();
    while (p.size() < pool_len) p += kAlnum[(*rng)() % (sizeof kAlnum - 1)];
  }
}

// The counters a phase line reports, read between phases.
struct PhaseCounts {
  uint64_t checked = 0;
  uint64_t violations = 0;
  uint64_t errors = 0;
};

PhaseCounts CountsOf(Shared* s) EXCLUDES(s->mu) {
  MutexLock guard(&s->mu);
  return {s->result->replies_checked, s->result->violations_total, s->result->io_errors};
}

// Runs one phase and appends its line ("phase NAME: R replies, consistent").
// Returns false if the server stopped answering (request errors so far).
bool RunPhase(const std::string& name, void (*phase)(Shared*), Shared* s) EXCLUDES(s->mu) {
  const PhaseCounts before = CountsOf(s);
  phase(s);
  const PhaseCounts after = CountsOf(s);
  std::string line =
      "phase " + name + ": " + std::to_string(after.checked - before.checked) + " replies, ";
  const uint64_t v = after.violations - before.violations;
  const uint64_t e = after.errors - before.errors;
  line += v == 0 ? "consistent" : std::to_string(v) + " VIOLATION(S)";
  if (e > 0) line += ", " + std::to_string(e) + " request error(s)";
  MutexLock guard(&s->mu);
  s->result->phase_lines.push_back(line);
  return after.errors == 0;
}

}  // namespace

void RunCheck(const CheckConfig& cfg, CheckResult* result) {
  *result = CheckResult();
  Shared s;
  s.cfg = &cfg;
  s.result = result;
  s.deadline_ns = MonotonicNanos() + static_cast<int64_t>(cfg.time_limit_s * 1e9);
  std::mt19937_64 rng(cfg.seed);
  ChoosePositions(&rng, &s);
  MakePool(&rng, &s);
  struct Phase {
    std::string name;
    void (*run)(Shared*);
  };
  const Phase phases[] = {
      {"baseline (" + std::to_string(s.positions.size()) + " positions)", ReadBaselines},
      {"attacker (" + std::to_string(s.attack_positions.size()) +
           " positions x 7 writers + 1 reader x " + std::to_string(cfg.attack_requests) +
           " requests)",
       AttackPhase},
      {"read-your-writes", ReadYourWritesPhase},
      {"all-positions (" + std::to_string(kSweepThreads) + " threads)", SweepPhase},
  };
  for (const Phase& ph : phases) {
    if (!RunPhase(ph.name, ph.run, &s)) return;  // the server stopped answering
  }
}

}  // namespace kv
