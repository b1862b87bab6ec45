#include "client/event_loop.h"

#include <sys/epoll.h>

#include <algorithm>
#include <cerrno>

#include "common/status.h"

namespace kv::load {

void EventLoop::Adopt(LoopClient* c) {
  c->slot = static_cast<uint32_t>(adopted_.size());
  adopted_.push_back(c);
}

bool EventLoop::EndIfDone(LoopClient* c) {
  if (c->measured < c->quota && !shared_->stop.load(std::memory_order_relaxed) &&
      !PastDeadline(shared_, NowNs())) {
    return false;
  }
  c->done = true;
  --active_;
  return true;
}

void EventLoop::StartNext(uint32_t slot) {
  LoopClient* c = adopted_[slot];
  while (!c->done) {
    if (EndIfDone(c)) return;
    c->workload.FillRequest(c->workload.Next(), &c->request);
    c->sent_ns = NowNs();
    if (Begin(slot)) return;  // in flight
  }
}

void EventLoop::Book(LoopClient* c, ErrorKind kind, uint64_t done_ns, const std::string& detail) {
  c->due_ns = kNoDeadline;
  BookRequest(shared_, /*open_loop=*/false, {c->sent_ns, c->sent_ns, done_ns}, kind, detail, c->w,
              &c->measured);
}

int EventLoop::WaitMs(uint64_t now) const {
  constexpr uint64_t kMaxNs = 50'000'000ULL;
  const uint64_t ns = next_due_ <= now ? 0 : std::min(next_due_ - now, kMaxNs);
  return static_cast<int>((ns + 999'999ULL) / 1'000'000ULL);
}

void EventLoop::ExpireDue(uint64_t now) {
  if (now < next_due_) return;
  next_due_ = kNoDeadline;  // recomputed from the deadlines still ahead
  for (LoopClient* c : adopted_) {
    if (c->due_ns == kNoDeadline) continue;
    if (now < c->due_ns) {
      next_due_ = std::min(next_due_, c->due_ns);
      continue;
    }
    Expire(c->slot, now);
    if (c->due_ns == kNoDeadline) StartNext(c->slot);  // booked: its next request
  }
}

void EventLoop::Run() {
  // The epoll set (the status says why there is none), then the start line.
  ep_.Reset(::epoll_create1(EPOLL_CLOEXEC));
  const Status ep_status = ep_ ? Status::OK() : Status::IOError("epoll_create1", errno);
  shared_->ready.count_down();
  shared_->go.wait();
  active_ = static_cast<uint32_t>(adopted_.size());
  for (LoopClient* c : adopted_) {
    if (ep_) {
      StartNext(c->slot);
      continue;
    }
    c->sent_ns = NowNs();
    Book(c, ErrorKind::kOther, c->sent_ns, ep_status.message());
    c->done = true;
    --active_;
  }
  std::vector<epoll_event> events(std::max<std::size_t>(adopted_.size(), 1));
  while (active_ > 0 && !shared_->stop.load(std::memory_order_relaxed)) {
    const int n =
        ::epoll_wait(ep_.get(), events.data(), static_cast<int>(events.size()), WaitMs(NowNs()));
    for (int i = 0; i < n; ++i) OnEvent(events[i].data.u64, events[i].events);
    ExpireDue(NowNs());
  }
  CloseAll();
  FinishWorker(shared_);
}

}  // namespace kv::load
