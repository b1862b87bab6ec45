// UniqueFile: sole owner of a std::FILE*, closed when the owner goes away.
//
// std::unique_ptr with an fclose deleter. The deleter ignores fclose's
// result, which is right only for a stream nothing was written to (or whose
// data no longer matters); where data was written, call CloseFile() and act
// on its Status: fclose flushes the buffer, and that write can fail.
//
// Thread safety: as std::unique_ptr; the FILE* itself has stdio's locking.
#ifndef KV_COMMON_UNIQUE_FILE_H_
#define KV_COMMON_UNIQUE_FILE_H_

#include <cerrno>
#include <cstdio>
#include <memory>
#include <string_view>

#include "common/status.h"

namespace kv {

struct FileCloser {
  void operator()(std::FILE* file) const {
    // Deliberately unchecked: see the header comment (CloseFile checks).
    static_cast<void>(std::fclose(file));
  }
};

using UniqueFile = std::unique_ptr<std::FILE, FileCloser>;

// Flushes and closes *file now; OK for an empty one. On failure (the final
// flush failed, or an earlier write left the stream's error flag set)
// returns IOError("<what>: <strerror>"). *file is empty afterwards either way.
inline Status CloseFile(UniqueFile* file, std::string_view what) {
  std::FILE* f = file->release();
  if (f == nullptr) return Status::OK();
  const bool earlier_error = std::ferror(f) != 0;
  if (std::fclose(f) != 0) return Status::IOError(what, errno);
  if (earlier_error) return Status::IOError(what, EIO);
  return Status::OK();
}

}  // namespace kv

#endif  // KV_COMMON_UNIQUE_FILE_H_
