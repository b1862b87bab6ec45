// Status: the result of an operation on the request path, shaped like LevelDB's.
//
// A Status is either OK or carries a code and a human-readable message. Errors
// are values: nothing on the request path throws. The message is what an
// ERROR reply carries after the word "ERROR", e.g. "pos 1200 out of range
// [0,1000)".
//
// Thread safety: a Status is a value; distinct objects may be used from
// distinct threads without synchronisation.
#ifndef KV_COMMON_STATUS_H_
#define KV_COMMON_STATUS_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

namespace kv {

class Status {
 public:
  enum class Code { kOk, kInvalidArgument, kOutOfRange, kIOError, kFailed };

  Status() = default;  // OK

  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string message) {
    return Status(Code::kInvalidArgument, std::move(message));
  }
  // "<field> <value> out of range [0,<limit>)"
  static Status OutOfRange(std::string_view field, uint64_t value, uint64_t limit) {
    std::string m(field);
    m += ' ';
    m += std::to_string(value);
    m += " out of range [0,";
    m += std::to_string(limit);
    m += ')';
    return Status(Code::kOutOfRange, std::move(m));
  }

  // "<what>: <strerror(errno_value)>", e.g. "bind 127.0.0.1:4000: Address already in use".
  static Status IOError(std::string_view what, int errno_value);

  // Work that ran but did not succeed as a whole, e.g. a load run in which
  // requests failed: the message says what happened.
  static Status Failed(std::string message) { return Status(Code::kFailed, std::move(message)); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // "OK", or the message.
  std::string ToString() const { return ok() ? std::string("OK") : message_; }

 private:
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  Code code_ = Code::kOk;
  std::string message_;
};

inline Status Status::IOError(std::string_view what, int errno_value) {
  std::string m(what);
  m += ": ";
  m += std::strerror(errno_value);
  return Status(Code::kIOError, std::move(m));
}

}  // namespace kv

#endif  // KV_COMMON_STATUS_H_
