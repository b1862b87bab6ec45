// Text as a template argument: a strategy's name (LockedStore<T, "one-mutex">,
// SlotStoreBase<S, Timing, "seqlock-per-slot">) or a lock family's words
// (LockFamily, store_lock_table.h). `+` joins two at compile time, so a
// family's three names and descriptions are made from one word each.
//
// Thread safety: an immutable value.
#ifndef KV_COMMON_FIXED_STRING_H_
#define KV_COMMON_FIXED_STRING_H_

#include <algorithm>
#include <cstddef>
#include <string_view>

namespace kv {

template <std::size_t N>
struct FixedString {
  constexpr FixedString() = default;
  // NOLINTNEXTLINE(google-explicit-constructor): converts string literals.
  constexpr FixedString(const char (&text)[N]) { std::copy_n(text, N, chars); }
  constexpr std::string_view view() const { return {chars, N - 1}; }
  char chars[N] = {};  // public: a template argument's members must be
};

template <std::size_t A, std::size_t B>
constexpr FixedString<A + B - 1> operator+(const FixedString<A>& a, const FixedString<B>& b) {
  FixedString<A + B - 1> joined;
  std::copy_n(a.chars, A - 1, joined.chars);
  std::copy_n(b.chars, B, joined.chars + A - 1);
  return joined;
}

}  // namespace kv

#endif  // KV_COMMON_FIXED_STRING_H_
