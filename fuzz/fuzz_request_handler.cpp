// libFuzzer target: the whole request path (parse, locking strategy, reply)
// of RequestHandler, on in-memory arrays with the artificial delay set to 0,
// for each of the four lab strategies.
//
// The input is a stream of request frames as a keep-alive connection would
// carry them: 100-byte chunks, the last one possibly shorter (a frame cut by
// a half-close). Each frame goes through a RequestHandler per strategy, for
// arrays of 1 and 100 strings, and after every frame:
//   - the reply frame is NUL-terminated within its 100 bytes;
//   - the handler accepts the frame exactly when ParseRequest() does;
//   - valid: the reply equals what a read of slot pos returns now (a write
//     stored its text cut to 99 bytes), no other slot changed, and the reply
//     is not an ERROR unless the stored value itself begins with "ERROR "
//     (a client may store such a string; the protocol cannot tell);
//   - invalid: the reply starts with "ERROR " and the array is unchanged;
//   - the counters count every frame and every rejection.
// At the end all four strategies hold identical arrays (differential check).
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/artificial_delay.h"
#include "common/protocol.h"
#include "common/request_handler.h"
#include "common/store.h"
#include "common/store_mutex_per_slot.h"
#include "common/store_one_mutex.h"
#include "common/store_one_rwlock.h"
#include "common/store_rwlock_per_slot.h"

namespace {

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "invariant violated: %s\n", what);
    std::abort();
  }
}

std::string_view Text(const kv::Frame& f) {
  Check(std::memchr(f.data(), '\0', f.size()) != nullptr, "frame NUL-terminated within 100 bytes");
  return kv::FrameText(std::string_view(f.data(), f.size()));
}

std::vector<std::string> Snapshot(kv::Store* store) {
  std::vector<std::string> values;
  values.reserve(store->size());
  for (std::size_t i = 0; i < store->size(); ++i) {
    kv::Value v;
    kv::AccessTiming t;
    Check(store->Read(i, &v, &t).ok(), "read of a valid pos succeeds");
    values.emplace_back(Text(v));
  }
  return values;
}

struct Lane {
  std::unique_ptr<kv::Store> store;
  kv::RequestCounters counters;
  std::unique_ptr<kv::RequestHandler> handler;
  uint64_t frames = 0;
  uint64_t rejected = 0;
};

void RunFrames(std::string_view input, std::size_t n) {
  kv::ArtificialDelay delay{std::chrono::microseconds(0)};
  const kv::StoreFactory factories[] = {&kv::OneMutexStore::Create, &kv::MutexPerSlotStore::Create,
                                        &kv::OneRwLockStore::Create,
                                        &kv::RwLockPerSlotStore::Create};
  std::array<Lane, 4> lanes;
  for (std::size_t k = 0; k < lanes.size(); ++k) {
    lanes[k].store = factories[k](n, &delay);
    lanes[k].handler =
        std::make_unique<kv::RequestHandler>(lanes[k].store.get(), nullptr, &lanes[k].counters);
  }
  for (std::size_t off = 0; off < input.size(); off += kv::kFrameSize) {
    const std::string_view frame = input.substr(off, kv::kFrameSize);
    kv::Request parsed;
    const bool valid = kv::ParseRequest(frame, n, &parsed).ok();
    for (Lane& lane : lanes) {
      const std::vector<std::string> before = Snapshot(lane.store.get());
      kv::Frame reply;
      std::memset(reply.data(), 'Z', reply.size());  // no NUL unless written
      const bool ok = lane.handler->Handle(frame, 0, &reply);
      const std::string_view reply_text = Text(reply);
      ++lane.frames;
      Check(ok == valid, "handler and parser agree on validity");
      const std::vector<std::string> after = Snapshot(lane.store.get());
      if (!ok) {
        ++lane.rejected;
        Check(kv::IsErrorReply(reply_text), "rejected => ERROR reply");
        Check(after == before, "rejected => array unchanged");
        continue;
      }
      Check(reply_text == after[parsed.pos], "reply == what a read returns");
      if (!parsed.is_read) {
        Check(after[parsed.pos] ==
                  parsed.text.substr(0, std::min(parsed.text.size(), kv::kMaxTextLen)),
              "write stores its text");
      }
      for (std::size_t i = 0; i < n; ++i) {
        if (i != parsed.pos || parsed.is_read) {
          Check(after[i] == before[i], "no other slot changes");
        }
      }
      Check(!kv::IsErrorReply(reply_text) || kv::IsErrorReply(after[parsed.pos]),
            "valid => not an ERROR reply (unless that is the stored value)");
    }
  }
  const std::vector<std::string> reference = Snapshot(lanes[0].store.get());
  for (Lane& lane : lanes) {
    Check(lane.counters.frames.load() == lane.frames, "frames counted");
    Check(lane.counters.rejected.load() == lane.rejected, "rejections counted");
    Check(Snapshot(lane.store.get()) == reference, "all strategies end with the same array");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  RunFrames(input, 1);
  RunFrames(input, 12);
  return 0;
}
