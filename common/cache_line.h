// The cache line size the lock types and tables pad to, so that what one core
// spins on or writes does not share a line with a neighbour's.
//
// Thread safety: a constant.
#ifndef KV_COMMON_CACHE_LINE_H_
#define KV_COMMON_CACHE_LINE_H_

#include <cstddef>

namespace kv {

inline constexpr std::size_t kCacheLineSize = 64;

}  // namespace kv

#endif  // KV_COMMON_CACHE_LINE_H_
