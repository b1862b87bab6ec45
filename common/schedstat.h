// Linux schedstat: how long a thread was runnable but not running.
//
// /proc/<pid>/task/<tid>/schedstat (and /proc/thread-self/schedstat) holds
// three numbers: time spent on a CPU (ns), time spent runnable on a run queue
// waiting for a CPU ("run_delay", ns), and the number of timeslices run. The
// difference of run_delay across a request is its CPU wait: the part of the
// lab's latency that is scheduler queueing rather than locking or sleeping.
// (The counters need CONFIG_SCHED_INFO, set in Debian's kernels; they are kept
// even with kernel.sched_schedstats off.)
//
// Cost and sampling: a read is a pread(2) of a per-thread descriptor kept open
// (opened on the thread's first read; the seq_file is regenerated at offset
// 0), so measuring a request costs two system calls, about 1-2 us each here
// (bench/timing_cost_bench.cpp measures it next to clock_gettime and
// open+read+close; docs/performance.md has the figures). That is too much for
// every request of a 10 us keep-alive round trip, so the server samples: a
// request is measured when a hash of its receive timestamp falls in 1 of
// kCpuWaitSampleEvery buckets. The decision is made before the request runs
// and depends on nothing shared, so the sample is unbiased and the hot path
// writes nothing shared; the summary's mean_cpu_wait_s is the mean over the
// sampled requests (cpu_wait_samples says how many).
//
// Thread safety: every function is reentrant; the descriptor is thread_local
// and closed when its thread exits.
#ifndef KV_COMMON_SCHEDSTAT_H_
#define KV_COMMON_SCHEDSTAT_H_

#include <cstdint>
#include <string_view>

namespace kv {

struct SchedStat {
  int64_t cpu_ns = 0;        // time on a CPU
  int64_t run_delay_ns = 0;  // time runnable, waiting for a CPU
  uint64_t timeslices = 0;
};

// Parses the text of a schedstat file ("<cpu> <run_delay> <slices>\n").
// Returns false (and leaves *out alone) unless it is three decimal numbers.
bool ParseSchedStat(std::string_view text, SchedStat* out);

// The calling thread's schedstat through its kept-open descriptor. Returns
// false if the file cannot be read (no /proc, kernel without SCHED_INFO);
// after a failed open the thread does not try again.
bool ReadThreadSchedStat(SchedStat* out);

// The same with open + read + close every time (cost comparison only).
bool ReadThreadSchedStatFresh(SchedStat* out);

// One request in kCpuWaitSampleEvery (a power of two) has its CPU wait
// measured.
inline constexpr int kCpuWaitSampleShift = 4;
inline constexpr uint64_t kCpuWaitSampleEvery = uint64_t{1} << kCpuWaitSampleShift;

// Whether the request received at `received_ns` is sampled: a multiplicative
// hash of the timestamp, so it works at any clock granularity.
inline bool SampleCpuWait(int64_t received_ns) {
  return (static_cast<uint64_t>(received_ns) * 0x9E3779B97F4A7C15ULL) >>
             (64 - kCpuWaitSampleShift) ==
         0;
}

}  // namespace kv

#endif  // KV_COMMON_SCHEDSTAT_H_
