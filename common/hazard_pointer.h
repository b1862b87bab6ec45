// Hazard pointers (Michael, IEEE TPDS 2004): safe memory reclamation for
// lock-free readers, as used by store_pointer_swap.h.
//
// A reader that wants to dereference a shared pointer first publishes it in
// its thread's hazard record ("I am reading this"), then checks the pointer is
// still current; a writer that has unlinked an object frees it only once no
// hazard record holds it. Here:
//   HazardGuard guard;                       // this thread's record
//   const T* p = guard.Protect(shared);      // safe to read *p ...
//   ...                                      // ... until guard dies or
//                                            // protects something else
// and writers collect unlinked objects in a RetireList, whose Retire() frees
// every retired object no hazard record points to (in batches, so the cost
// per retire is O(1) amortised and at most ~2 x records + 16 objects wait).
//
// Records form one global, grow-only, lock-free list; a thread takes a free
// record on first use and gives it back when it exits (thread_local), so the
// number of records is the peak number of threads that ever read at once.
// Records are never freed: they stay reachable from the list head (no leak
// report) and are reused by later threads.
//
// Memory ordering: publishing a hazard, re-reading the source, the writer's
// exchange and its scan of the records are all seq_cst, which is what the
// algorithm needs (store-load ordering on both sides). The reader's release
// of the record happens-before any scan that then frees the object, which is
// also what tells ThreadSanitizer the free does not race with the reads.
//
// Thread safety: HazardGuard is per thread (do not share one between
// threads; one guard at a time per thread). RetireList is internally locked.
#ifndef KV_COMMON_HAZARD_POINTER_H_
#define KV_COMMON_HAZARD_POINTER_H_

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "common/thread_annotations.h"

namespace kv {

struct alignas(64) HazardRecord {
  std::atomic<const void*> hazard{nullptr};  // what the owner is reading
  std::atomic<bool> in_use{false};           // owned by a live thread
  HazardRecord* next = nullptr;              // immutable once published
};

namespace hazard_internal {

inline std::atomic<HazardRecord*> g_records{nullptr};
inline std::atomic<std::size_t> g_record_count{0};

inline HazardRecord* Acquire() {
  for (HazardRecord* r = g_records.load(std::memory_order_acquire); r != nullptr; r = r->next) {
    bool expected = false;
    if (!r->in_use.load(std::memory_order_relaxed) &&
        r->in_use.compare_exchange_strong(expected, true, std::memory_order_acquire)) {
      return r;
    }
  }
  // The one allocation of a record, never freed: records form a lock-free
  // list that readers walk without a lock, so one cannot be unlinked safely;
  // a thread's record is reused by later threads (at most one per thread
  // ever alive at once).
  HazardRecord* r = std::make_unique<HazardRecord>().release();
  r->in_use.store(true, std::memory_order_relaxed);
  HazardRecord* head = g_records.load(std::memory_order_relaxed);
  do {
    r->next = head;
  } while (!g_records.compare_exchange_weak(head, r, std::memory_order_release,
                                            std::memory_order_relaxed));
  g_record_count.fetch_add(1, std::memory_order_relaxed);
  return r;
}

// This thread's record, taken on first use and returned at thread exit.
class ThreadRecord {
 public:
  ~ThreadRecord() {
    if (record_ == nullptr) return;
    record_->hazard.store(nullptr, std::memory_order_release);
    record_->in_use.store(false, std::memory_order_release);
  }
  HazardRecord* get() {
    if (record_ == nullptr) record_ = Acquire();
    return record_;
  }

 private:
  HazardRecord* record_ = nullptr;
};

inline HazardRecord* ThisThreadRecord() {
  thread_local ThreadRecord record;
  return record.get();
}

}  // namespace hazard_internal

// Protects one pointer at a time for the calling thread; clears the hazard
// when destroyed. Not copyable.
class HazardGuard {
 public:
  HazardGuard() : record_(hazard_internal::ThisThreadRecord()) {}
  ~HazardGuard() { record_->hazard.store(nullptr, std::memory_order_release); }
  HazardGuard(const HazardGuard&) = delete;
  HazardGuard& operator=(const HazardGuard&) = delete;

  // Returns the current value of `src`, published as this thread's hazard:
  // it will not be freed (by a RetireList) until the guard is destroyed or
  // protects another pointer. Lock-free: retries only if a writer changed
  // `src` between the load and the publication.
  template <typename T>
  const T* Protect(const std::atomic<const T*>& src) {
    const T* p = src.load(std::memory_order_seq_cst);
    for (;;) {
      record_->hazard.store(p, std::memory_order_seq_cst);
      const T* again = src.load(std::memory_order_seq_cst);
      if (again == p) return p;
      p = again;
    }
  }

 private:
  HazardRecord* record_;
};

// Objects unlinked from shared pointers, freed once no hazard holds them.
template <typename T>
class RetireList {
 public:
  RetireList() = default;
  RetireList(const RetireList&) = delete;
  RetireList& operator=(const RetireList&) = delete;
  // Frees what is left. REQUIRES: no thread still reads any retired object.
  ~RetireList() = default;

  // Takes ownership of `p`, which the caller has already unlinked (with a
  // seq_cst exchange) so that no new reader can find it. Frees it, and any
  // earlier retired object, as soon as no hazard record points to it.
  void Retire(const T* p) EXCLUDES(retire_mu_) {
    MutexLock guard(&retire_mu_);
    retired_.emplace_back(p);
    const std::size_t threshold =
        2 * hazard_internal::g_record_count.load(std::memory_order_relaxed) + 16;
    if (retired_.size() >= threshold) ScanLocked();
  }

  std::size_t pending() EXCLUDES(retire_mu_) {
    MutexLock guard(&retire_mu_);
    return retired_.size();
  }

 private:
  void ScanLocked() REQUIRES(retire_mu_) {
    hazards_.clear();
    for (HazardRecord* r = hazard_internal::g_records.load(std::memory_order_acquire); r != nullptr;
         r = r->next) {
      if (const void* h = r->hazard.load(std::memory_order_seq_cst)) {
        hazards_.push_back(h);
      }
    }
    std::sort(hazards_.begin(), hazards_.end());
    std::size_t kept = 0;
    for (std::unique_ptr<const T>& p : retired_) {
      if (std::binary_search(hazards_.begin(), hazards_.end(), static_cast<const void*>(p.get()))) {
        retired_[kept++] = std::move(p);  // still being read: try again next scan
      }
    }
    retired_.resize(kept);  // frees the rest
  }

  Mutex retire_mu_;
  // Unlinked, maybe still read.
  std::vector<std::unique_ptr<const T>> retired_ GUARDED_BY(retire_mu_);
  // Scratch for ScanLocked().
  std::vector<const void*> hazards_ GUARDED_BY(retire_mu_);
};

}  // namespace kv

#endif  // KV_COMMON_HAZARD_POINTER_H_
