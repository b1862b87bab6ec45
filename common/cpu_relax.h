// CpuRelax: the CPU's spin-wait hint, for busy-wait loops.
//
// x86 `pause` (lets the sibling hyperthread run and avoids the memory-order
// mis-speculation penalty when the loop exits), AArch64 `yield`; nothing
// elsewhere. Used by the spinlock store (store_spinlock_per_slot.h) and the
// precise artificial delay's final spin (artificial_delay.cpp).
//
// Thread safety: no state.
#ifndef KV_COMMON_CPU_RELAX_H_
#define KV_COMMON_CPU_RELAX_H_

namespace kv {

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace kv

#endif  // KV_COMMON_CPU_RELAX_H_
