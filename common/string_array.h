// StringArray: the lab's shared array of n strings, without any locking.
//
// Slot i starts as "String i: the initial value". Each slot holds at most
// kMaxTextLen (99) bytes plus a NUL in a fixed 100-byte buffer, like the kit's
// char[COM_BUFF_SIZE]. GetLocked() and SetLocked() each take the lab's artificial delay
// before they copy, as the kit's getContent()/setContent() do.
//
// Thread safety: NONE. A StringArray is the data a locking strategy guards;
// every call must be made with the strategy's lock for that slot held
// (shared for Get, exclusive for Set). See store.h.
#ifndef KV_COMMON_STRING_ARRAY_H_
#define KV_COMMON_STRING_ARRAY_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/artificial_delay.h"
#include "common/protocol.h"

namespace kv {

using Value = Frame;  // one slot: NUL-terminated text in 100 bytes

class StringArray {
 public:
  // REQUIRES: n >= 1. `delay` must outlive the array.
  StringArray(std::size_t n, ArtificialDelay* delay);

  std::size_t size() const { return slots_.size(); }

  // Pauses, then copies slot pos (all 100 bytes) into *out.
  // REQUIRES: pos < size(); the caller holds a lock that excludes writers.
  void GetLocked(std::size_t pos, Value* out) const;

  // Pauses, then stores `text` cut to kMaxTextLen bytes plus a NUL.
  // REQUIRES: pos < size(); the caller holds a lock that excludes everyone.
  void SetLocked(std::size_t pos, std::string_view text);

  // The value slot i holds before any write.
  static std::string InitialValue(std::size_t i);

 private:
  std::vector<Value> slots_;
  ArtificialDelay* delay_;
};

}  // namespace kv

#endif  // KV_COMMON_STRING_ARRAY_H_
