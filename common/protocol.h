// The lab's wire protocol (docs/server.md): one request frame, one reply frame.
//
// A request frame is exactly kFrameSize (100) bytes holding a NUL-terminated text
// `pos-is_read-text`; bytes after the NUL are garbage and ignored. A frame cut
// short because the peer half-closed (e.g. `printf '3-1-' | nc -N host port`)
// is still a frame: its text ends where the bytes end. A reply frame is
// kFrameSize bytes holding the NUL-terminated string now stored at `pos`, or an
// error text beginning with "ERROR ".
//
// Everything here is pure: no sockets, no locks, no allocation on the OK path.
// Thread safety: all functions are reentrant.
#ifndef KV_COMMON_PROTOCOL_H_
#define KV_COMMON_PROTOCOL_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace kv {

inline constexpr std::size_t kFrameSize = 100;              // COM_BUFF_SIZE of the kit
inline constexpr std::size_t kMaxTextLen = kFrameSize - 1;  // plus the NUL
inline constexpr std::string_view kErrorPrefix = "ERROR ";

using Frame = std::array<char, kFrameSize>;

struct Request {
  uint64_t pos = 0;
  bool is_read = true;
  std::string_view text;  // points into the parsed frame; empty for most reads
};

// Parses the bytes of one request frame (kFrameSize of them, or fewer if the
// peer half-closed early) for an array of `n` strings.
// On success returns OK and fills *out (out->text views `frame`).
// On failure returns a non-OK Status whose message names the field, the value
// (sanitised, at most a few dozen bytes) and what is allowed, e.g.
//   "pos 1200 out of range [0,1000)", "is_read '2' must be 0 (write) or 1 (read)".
// *out is unspecified on failure.
Status ParseRequest(std::string_view frame, uint64_t n, Request* out);

// The text of a frame: the bytes up to the first NUL, or all of them.
std::string_view FrameText(std::string_view frame);

// Fills *out with `text` (cut to kMaxTextLen bytes), a NUL, and zero padding.
void FillFrame(std::string_view text, Frame* out);

// Fills *out with "ERROR <message>" (cut to fit) as a reply frame.
void FillErrorFrame(std::string_view message, Frame* out);

// Fills *out with the request text "pos-is_read-text" (cut to fit).
void FillRequestFrame(uint64_t pos, bool is_read, std::string_view text, Frame* out);

// True if a reply text is an error reply.
inline bool IsErrorReply(std::string_view reply_text) {
  return reply_text.substr(0, kErrorPrefix.size()) == kErrorPrefix;
}

// A bounded, printable rendering of untrusted bytes for messages: printable
// ASCII is kept, other bytes become \xHH, and anything past `max_bytes` input
// bytes becomes "...". Never longer than 4 * max_bytes + 3 characters.
std::string Sanitize(std::string_view bytes, std::size_t max_bytes = 16);

}  // namespace kv

#endif  // KV_COMMON_PROTOCOL_H_
