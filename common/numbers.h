// The one rule for numbers on the command line of every lockbench binary
// (main1..main4, lockserver, client), for options and positionals alike:
//
//   A whole number is one or more ASCII digits, read as decimal, as the kit's
//   atoi reads them: leading zeros are allowed and never mean octal ("03000"
//   is 3000). Nothing else: no sign ("+5", "-5", "-0"), no "0x", no fraction
//   or exponent ("1.5", "1e3"), no spaces (" 5"), not empty.
//
//   A real number is digits with at most one decimal point ("0.5", ".5",
//   "5."), optionally followed by an exponent ("1e-3", "1E+06"); finite. No
//   sign, no "0x" (hex floats included), no "nan" or "inf", no spaces, not
//   empty.
//
//   Either must lie in the argument's range [lo, hi], both ends included.
//
// A refusal is InvalidArgument whose message names the value and the range,
// e.g. "'1.5' is not a decimal integer (digits only); allowed 0..1000000";
// callers put the argument's name in front ("--delay-us: ..."), so every
// binary's one-line error reads the same.
//
// Thread safety: pure functions.
#ifndef KV_COMMON_NUMBERS_H_
#define KV_COMMON_NUMBERS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace kv {

// A whole number in [lo, hi]: OK with *out set, or InvalidArgument
// "'<text>' is empty|is not a decimal integer (digits only)|is out of range;
// allowed <lo>..<hi>" (*out untouched).
Status ParseUnsigned(std::string_view text, uint64_t lo, uint64_t hi, uint64_t* out);

// A real number in [lo, hi], as ParseUnsigned ("is not a decimal number
// (digits, a point, an exponent)"); the range is printed with %.15g.
Status ParseDecimalDouble(std::string_view text, double lo, double hi, double* out);

// `reason` (a failed Status from above) for the argument `name`:
// InvalidArgument "<name>: <reason's message>".
Status NumberError(std::string_view name, const Status& reason);

// `v` as the refusals print a range end: %.15g ("0.001", "86400").
std::string FormatDecimal(double v);

}  // namespace kv

#endif  // KV_COMMON_NUMBERS_H_
