#include "client/load_run.h"

#include <algorithm>

namespace kv::load {
namespace {

// A refused connect: nobody listens. Stop every thread (see load_generator.h).
void NoteServerGone(Shared* shared, const std::string& detail) {
  if (!shared->server_gone.exchange(true)) shared->gone_detail = detail;
  shared->stop.store(true, std::memory_order_relaxed);
}

// Books one finished request into *w; returns true if it was measured (its
// intended start is past the warm-up).
bool Record(const Shared& shared, bool open_loop, const RequestTimes& at, ErrorKind kind,
            Worker* w) {
  if (kind == ErrorKind::kNone || kind == ErrorKind::kErrorReply) ++w->answered;
  if (at.due < shared.measure_ns) {
    ++w->warmup;
    return false;
  }
  if (kind == ErrorKind::kNone) {
    ++w->ok;
    w->latency.Record(at.done - at.due);
    if (open_loop) w->uncorrected.Record(at.done - at.sent);
  } else {
    ++w->errors[static_cast<int>(kind)];
  }
  if (open_loop && at.sent > at.due) w->max_lag_ns = std::max(w->max_lag_ns, at.sent - at.due);
  const std::size_t sec =
      static_cast<std::size_t>((at.done - shared.measure_ns) / 1'000'000'000ULL);
  if (sec < 100000) {
    if (w->timeline.size() <= sec) w->timeline.resize(sec + 1);
    ++(kind == ErrorKind::kNone ? w->timeline[sec].ok : w->timeline[sec].errors);
  }
  w->end_ns = at.done;
  return true;
}

// Bytes came after a reply already booked as `was` (seen when an idle
// keep-alive connection spoke, or was closed): by the exchange's rule that
// reply was longer than a frame, so it is booked again as a long_reply.
void RebookLongReply(Worker* w, ErrorKind was) {
  if (was == ErrorKind::kNone && w->ok > 0) {
    --w->ok;
    auto it = std::find_if(w->timeline.rbegin(), w->timeline.rend(),
                           [](const TimelinePoint& p) { return p.ok > 0; });
    if (it != w->timeline.rend()) {
      --it->ok;
      ++it->errors;
    }
  } else if (was != ErrorKind::kNone && w->errors[static_cast<int>(was)] > 0) {
    --w->errors[static_cast<int>(was)];
  }
  ++w->errors[static_cast<int>(ErrorKind::kLongReply)];
  if (w->first_error.empty()) {
    w->first_error = std::string("long_reply after a keep-alive reply: ") + kLongReplyMeaning;
  }
}

}  // namespace

ClientPlan PlanClient(const LoadConfig& cfg, uint32_t t) {
  const uint32_t nthreads = cfg.threads;
  ClientPlan plan;
  plan.quota = cfg.requests == 0 ? UINT64_MAX
                                 : cfg.requests / nthreads + (t < cfg.requests % nthreads ? 1 : 0);
  if (cfg.keepalive) {
    const uint32_t total = std::max(cfg.connections, nthreads);
    plan.conns = (total - t + nthreads - 1) / nthreads;
  }
  return plan;
}

bool PastDeadline(Shared* shared, uint64_t now) {
  if (now < shared->deadline_ns) return false;
  if (shared->limit_binds) shared->time_limit_hit.store(true);
  return true;
}

void BookRequest(Shared* shared, bool open_loop, const RequestTimes& times, ErrorKind kind,
                 const std::string& detail, Worker* w, uint64_t* measured) {
  if (Record(*shared, open_loop, times, kind, w)) {
    w->progress.store(++*measured, std::memory_order_relaxed);
  }
  if (kind != ErrorKind::kNone && w->first_error.empty()) w->first_error = detail;
  if (kind == ErrorKind::kConnect) NoteServerGone(shared, detail);
}

void ReadEndOf(LabConnection* conn, Worker* w, int64_t deadline_ns) {
  const ErrorKind was = conn->last().outcome();
  if (conn->ReadEnd(deadline_ns) == ErrorKind::kLongReply) RebookLongReply(w, was);
}

void CloseKeptConnections(const LoadConfig& cfg, const std::vector<KeptConnection>& kept) {
  for (const KeptConnection& k : kept) k.conn->HalfClose();
  const int64_t deadline = MonotonicNanos() + int64_t{EndGraceMs(cfg)} * 1'000'000;
  for (const KeptConnection& k : kept) {
    ReadEndOf(k.conn, k.w, deadline);
    k.conn->Close();
  }
}

void FinishWorker(Shared* shared) {
  MutexLock guard(&shared->done_mu);
  if (--shared->running == 0) shared->done_cv.SignalAll();
}

}  // namespace kv::load
