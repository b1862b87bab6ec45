#include "common/protocol.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>

namespace kv {
namespace {

constexpr std::string_view kShape = " (expected pos-is_read-text)";

std::string Quoted(std::string_view bytes) {
  // Built by appending: GCC 12's -Wrestrict misfires on "lit" + string&&.
  std::string quoted(1, '\'');
  quoted += Sanitize(bytes);
  quoted += '\'';
  return quoted;
}

// Returns the offset of the first byte that is not part of printable UTF-8
// text (control characters, DEL, malformed or overlong sequences), or npos.
std::size_t FirstBadTextByte(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7f) return i;
      ++i;
      continue;
    }
    std::size_t len;
    unsigned char lo = 0x80, hi = 0xbf;  // allowed range of the 2nd byte
    if (c >= 0xc2 && c <= 0xdf) {
      len = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
      len = 3;
      if (c == 0xe0) lo = 0xa0;  // no overlong forms
      if (c == 0xed) hi = 0x9f;  // no UTF-16 surrogates
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4;
      if (c == 0xf0) lo = 0x90;
      if (c == 0xf4) hi = 0x8f;  // <= U+10FFFF
    } else {
      return i;
    }
    if (i + len > s.size()) return i;
    for (std::size_t k = 1; k < len; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      const unsigned char min = k == 1 ? lo : 0x80;
      const unsigned char max = k == 1 ? hi : 0xbf;
      if (b < min || b > max) return i;
    }
    i += len;
  }
  return std::string_view::npos;
}

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The pos field: text[0, dash1), a decimal integer in [0, n).
Status ParsePos(std::string_view text, std::size_t dash1, uint64_t n, uint64_t* out) {
  const std::string_view pos_field = text.substr(0, dash1);
  if (pos_field.empty()) {
    // "-5-1-x": a negative position, or nothing at all before the dash.
    const std::string_view after = text.substr(1);
    const std::string_view digits = after.substr(0, std::min(after.find('-'), after.size()));
    if (AllDigits(digits)) {
      return Status::InvalidArgument("pos -" + Sanitize(digits) + " is negative; allowed [0," +
                                     std::to_string(n) + ")");
    }
    return Status::InvalidArgument("pos is empty" + std::string(kShape));
  }
  if (!AllDigits(pos_field)) {
    return Status::InvalidArgument("pos " + Quoted(pos_field) +
                                   " is not a non-negative decimal integer");
  }
  uint64_t pos = 0;
  const auto [ptr, ec] =
      std::from_chars(pos_field.data(), pos_field.data() + pos_field.size(), pos);
  if (ec == std::errc::result_out_of_range || (ec == std::errc() && pos >= n)) {
    return Status::InvalidArgument("pos " + Sanitize(pos_field, 24) + " out of range [0," +
                                   std::to_string(n) + ")");
  }
  *out = pos;
  return Status::OK();
}

}  // namespace

std::string_view FrameText(std::string_view frame) {
  const std::size_t nul = frame.find('\0');
  return nul == std::string_view::npos ? frame : frame.substr(0, nul);
}

Status ParseRequest(std::string_view frame, uint64_t n, Request* out) {
  if (frame.size() > kFrameSize) frame = frame.substr(0, kFrameSize);
  if (frame.size() == kFrameSize && frame.find('\0') == std::string_view::npos) {
    // A full frame without a terminator: the kit's parser would run off the
    // end of its buffer. We refuse rather than guess where the text ends.
    return Status::InvalidArgument("frame has no NUL terminator in its " +
                                   std::to_string(kFrameSize) + " bytes");
  }
  std::string_view text = FrameText(frame);
  // Typed by hand (echo ... | nc) a request ends in a newline: ignore one.
  if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
  if (text.empty()) {
    return Status::InvalidArgument("empty request" + std::string(kShape));
  }

  const std::size_t dash1 = text.find('-');
  if (dash1 == std::string_view::npos) {
    return Status::InvalidArgument("missing '-' after pos in " + Quoted(text) +
                                   std::string(kShape));
  }
  uint64_t pos = 0;
  if (Status s = ParsePos(text, dash1, n, &pos); !s.ok()) return s;

  const std::string_view rest = text.substr(dash1 + 1);
  const std::size_t dash2 = rest.find('-');
  if (dash2 == std::string_view::npos) {
    return Status::InvalidArgument("missing '-' after is_read in " + Quoted(text) +
                                   std::string(kShape));
  }
  const std::string_view read_field = rest.substr(0, dash2);
  if (read_field != "0" && read_field != "1") {
    return Status::InvalidArgument("is_read " + Quoted(read_field) +
                                   " must be 0 (write) or 1 (read)");
  }

  const std::string_view body = rest.substr(dash2 + 1);
  if (const std::size_t bad = FirstBadTextByte(body); bad != std::string_view::npos) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02x",
                  static_cast<unsigned>(static_cast<unsigned char>(body[bad])));
    return Status::InvalidArgument("text byte " + std::string(hex) + " at offset " +
                                   std::to_string(bad) + " is not printable UTF-8");
  }

  out->pos = pos;
  out->is_read = read_field == "1";
  out->text = body;
  return Status::OK();
}

void FillFrame(std::string_view text, Frame* out) {
  const std::size_t len = std::min(text.size(), kMaxTextLen);
  std::memcpy(out->data(), text.data(), len);
  std::memset(out->data() + len, 0, kFrameSize - len);
}

void FillErrorFrame(std::string_view message, Frame* out) {
  std::string text(kErrorPrefix);
  text.append(message.substr(0, kMaxTextLen - kErrorPrefix.size()));
  FillFrame(text, out);
}

void FillRequestFrame(uint64_t pos, bool is_read, std::string_view text, Frame* out) {
  // snprintf cuts at kMaxTextLen and terminates; no allocation (client hot path).
  const int len =
      std::snprintf(out->data(), kFrameSize, "%llu-%d-%.*s", static_cast<unsigned long long>(pos),
                    is_read ? 1 : 0, static_cast<int>(text.size()), text.data());
  const std::size_t used = std::min(static_cast<std::size_t>(len < 0 ? 0 : len), kMaxTextLen);
  std::memset(out->data() + used, 0, kFrameSize - used);
}

std::string Sanitize(std::string_view bytes, std::size_t max_bytes) {
  std::string out;
  const std::size_t take = std::min(bytes.size(), max_bytes);
  for (std::size_t i = 0; i < take; ++i) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", static_cast<unsigned>(c));
      out += hex;
    }
  }
  if (bytes.size() > take) out += "...";
  return out;
}

}  // namespace kv
