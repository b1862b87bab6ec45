#include "common/string_array.h"

namespace kv {

StringArray::StringArray(std::size_t n, ArtificialDelay* delay) : slots_(n), delay_(delay) {
  for (std::size_t i = 0; i < n; ++i) FillFrame(InitialValue(i), &slots_[i]);
}

void StringArray::GetLocked(std::size_t pos, Value* out) const {
  delay_->Pause();
  *out = slots_[pos];
}

void StringArray::SetLocked(std::size_t pos, std::string_view text) {
  delay_->Pause();
  FillFrame(text, &slots_[pos]);
}

std::string StringArray::InitialValue(std::size_t i) {
  return "String " + std::to_string(i) + ": the initial value";
}

}  // namespace kv
