#include "common/numbers.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <system_error>

namespace kv {
namespace {

constexpr std::string_view kDigits = "0123456789";

bool AllDigits(std::string_view s) {
  return !s.empty() && s.find_first_not_of(kDigits) == std::string_view::npos;
}

// Digits with at most one '.' and at least one digit, then optionally an
// exponent: [eE], an optional sign, digits. Everything from_chars would take
// beyond that (a leading '-', "inf", "nan") is left out here.
bool IsDecimalReal(std::string_view s) {
  const std::size_t e = s.find_first_of("eE");
  std::string_view mantissa = s.substr(0, e);
  if (const std::size_t point = mantissa.find('.'); point != std::string_view::npos) {
    const std::string_view before = mantissa.substr(0, point);
    const std::string_view after = mantissa.substr(point + 1);
    const bool digits_only = before.find_first_not_of(kDigits) == std::string_view::npos &&
                             after.find_first_not_of(kDigits) == std::string_view::npos;
    if (!digits_only || before.size() + after.size() == 0) return false;
  } else if (!AllDigits(mantissa)) {
    return false;
  }
  if (e == std::string_view::npos) return true;
  std::string_view exponent = s.substr(e + 1);
  if (!exponent.empty() && (exponent.front() == '+' || exponent.front() == '-')) {
    exponent.remove_prefix(1);
  }
  return AllDigits(exponent);
}

Status Refuse(std::string_view text, std::string_view why, const std::string& range) {
  std::string m = "'";
  m += text;
  m += "' ";
  m += why;
  m += "; allowed ";
  m += range;
  return Status::InvalidArgument(std::move(m));
}

}  // namespace

Status ParseUnsigned(std::string_view text, uint64_t lo, uint64_t hi, uint64_t* out) {
  const std::string range = std::to_string(lo) + ".." + std::to_string(hi);
  if (text.empty()) return Refuse(text, "is empty", range);
  if (!AllDigits(text)) return Refuse(text, "is not a decimal integer (digits only)", range);
  uint64_t v = 0;
  // All digits: from_chars reads every byte unless the value overflows (ec).
  const std::errc ec = std::from_chars(text.data(), text.data() + text.size(), v).ec;
  if (ec != std::errc() || v < lo || v > hi) return Refuse(text, "is out of range", range);
  *out = v;
  return Status::OK();
}

Status ParseDecimalDouble(std::string_view text, double lo, double hi, double* out) {
  const std::string range = FormatDecimal(lo) + ".." + FormatDecimal(hi);
  if (text.empty()) return Refuse(text, "is empty", range);
  double v = 0;
  const char* end = text.data() + text.size();
  // from_chars reads [data, end): the size is in `end`, no terminator is looked for.
  // NOLINTNEXTLINE(bugprone-suspicious-stringview-data-usage)
  const auto [p, ec] = std::from_chars(text.data(), end, v, std::chars_format::general);
  if (!IsDecimalReal(text) || (ec == std::errc() && p != end)) {
    return Refuse(text, "is not a decimal number (digits, a point, an exponent)", range);
  }
  // ec is result_out_of_range for 1e999 (and 1e-999): not finite doubles.
  if (ec != std::errc() || !std::isfinite(v) || v < lo || v > hi) {
    return Refuse(text, "is out of range", range);
  }
  *out = v;
  return Status::OK();
}

Status NumberError(std::string_view name, const Status& reason) {
  std::string m(name);
  m += ": ";
  m += reason.message();
  return Status::InvalidArgument(std::move(m));
}

std::string FormatDecimal(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.15g", v);
  return buf;
}

}  // namespace kv
