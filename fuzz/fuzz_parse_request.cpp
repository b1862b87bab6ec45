// libFuzzer target: the request parser (protocol.h) on arbitrary bytes.
//
// The input is one request frame as it comes off the socket (up to 100 bytes
// are used, like the server; fewer = a frame cut short by a half-close).
// It is parsed for several array sizes, and every outcome is checked:
//   - OK: pos < n, is_read and pos match the text, the text view lies inside
//     the frame and is printable UTF-8 without NUL, and writing the request
//     back with FillRequestFrame() parses to the same request;
//   - error: the message is short (<= kMaxMessage) and printable ASCII only,
//     i.e. it echoes at most a bounded, sanitised part of the input, and the
//     error frame is NUL-terminated and starts with "ERROR ".
// Sanitize() itself is checked against its documented bound.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "common/protocol.h"

namespace {

constexpr std::size_t kMaxMessage = 160;

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "invariant violated: %s\n", what);
    std::abort();
  }
}

bool PrintableAscii(std::string_view s) {
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u > 0x7e) return false;
  }
  return true;
}

void CheckOk(std::string_view frame, uint64_t n, const kv::Request& r) {
  Check(r.pos < n, "pos < n");
  const char* lo = frame.data();
  const char* hi = frame.data() + frame.size();
  Check(r.text.empty() || (r.text.data() >= lo && r.text.data() + r.text.size() <= hi),
        "text inside the frame");
  Check(r.text.find('\0') == std::string_view::npos, "no NUL in text");
  for (const char c : r.text) {
    const auto u = static_cast<unsigned char>(c);
    Check(u >= 0x20 && u != 0x7f, "no control byte in text");
  }
  // The text of the frame starts with the decimal pos, '-', is_read, '-'.
  const std::string_view text = kv::FrameText(frame);
  const std::size_t dash1 = text.find('-');
  Check(dash1 != std::string_view::npos && dash1 > 0, "pos field present");
  Check(text.size() > dash1 + 2 && text[dash1 + 1] == (r.is_read ? '1' : '0') &&
            text[dash1 + 2] == '-',
        "is_read field matches");
  // Round trip through the client's frame builder, when it fits.
  const std::string pos_s = std::to_string(r.pos);
  if (pos_s.size() + 3 + r.text.size() <= kv::kMaxTextLen) {
    kv::Frame again;
    kv::FillRequestFrame(r.pos, r.is_read, r.text, &again);
    kv::Request r2;
    const kv::Status s2 = kv::ParseRequest(std::string_view(again.data(), again.size()), n, &r2);
    Check(s2.ok(), "round trip parses");
    Check(r2.pos == r.pos && r2.is_read == r.is_read && r2.text == r.text,
          "round trip is identical");
  }
}

void CheckError(const kv::Status& s) {
  Check(!s.message().empty(), "error has a message");
  Check(s.message().size() <= kMaxMessage, "error message is bounded");
  Check(PrintableAscii(s.message()), "error message is printable ASCII");
  kv::Frame reply;
  kv::FillErrorFrame(s.message(), &reply);
  Check(std::memchr(reply.data(), '\0', reply.size()) != nullptr, "error frame is NUL-terminated");
  Check(kv::IsErrorReply(reply.data()), "error frame starts with ERROR");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::string_view frame = input.substr(0, kv::kFrameSize);
  for (const uint64_t n :
       {uint64_t{1}, uint64_t{10}, uint64_t{1000}, uint64_t{10'000'000}, UINT64_MAX}) {
    kv::Request request;
    const kv::Status s = kv::ParseRequest(frame, n, &request);
    if (s.ok()) {
      CheckOk(frame, n, request);
    } else {
      CheckError(s);
    }
  }
  // Sanitize's documented bound, for every cut-off up to 32 bytes.
  const std::size_t max_bytes = size == 0 ? 0 : data[0] % 33;
  const std::string clean = kv::Sanitize(input, max_bytes);
  Check(clean.size() <= 4 * max_bytes + 3, "Sanitize length bound");
  Check(PrintableAscii(clean), "Sanitize output printable");
  return 0;
}
