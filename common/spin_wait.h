// SpinWait: the bounded busy-wait of the spinning locks (ticket, MCS, CLH,
// phase-fair, flat combining): the CPU's pause hint a bounded number of
// times, then sched_yield() on every further round.
//
// Why yield at all: a waiter that only spins keeps its core for a whole time
// slice. When threads outnumber cores the thread it waits for (the holder, or
// in a queue lock the next in line) may be preempted and can only run again
// once a waiter gives its core up. Yielding bounds that damage; it does not
// remove it (a FIFO lock still cannot pass a preempted successor).
//
// Thread safety: a SpinWait belongs to the one thread that waits with it.
#ifndef KV_COMMON_SPIN_WAIT_H_
#define KV_COMMON_SPIN_WAIT_H_

#include <sched.h>

#include "common/cpu_relax.h"

namespace kv {

class SpinWait {
 public:
  // About 128 x 40..140 cycles (pause costs differ by CPU): a few
  // microseconds, longer than a short critical section, far shorter than a
  // time slice.
  static constexpr int kSpinsBeforeYield = 128;

  // One round of waiting: a pause, or a yield once the spins are used up.
  void Once() {
    if (spins_ < kSpinsBeforeYield) {
      ++spins_;
      CpuRelax();
    } else {
      sched_yield();
    }
  }

 private:
  int spins_ = 0;
};

// Waits (SpinWait) until done() is true.
template <typename Done>
void SpinUntil(Done&& done) {
  SpinWait wait;
  while (!done()) wait.Once();
}

}  // namespace kv

#endif  // KV_COMMON_SPIN_WAIT_H_
