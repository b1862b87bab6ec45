// wrong_length_server: TEST-ONLY server whose replies have the wrong length,
// so the client's tests can prove that such a reply is an error in every mode.
// Same command line as main1..main4 (<n> <ip> <port>; it listens on the port
// and its byte-swapped kit twin and prints a "listening on" line), plus
//   --shape exact   100 bytes (a well-formed reply: the control)
//   --shape long    150 bytes in one send
//   --shape split   100 bytes, then 50 more in a second send
//   --shape huge    100 bytes and 10 MB more in one send
// A thread per connection answers every 100-byte request with a reply of that
// shape until the peer closes, so it serves the kit's one request per
// connection and keep-alive alike. Never use it for measurements.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/net.h"
#include "common/protocol.h"
#include "common/unique_fd.h"

namespace {

constexpr std::size_t kHugeExtra = std::size_t{10} << 20;

// The bytes of one reply, and where the second send (split) starts.
struct Shape {
  std::string bytes;
  std::size_t split_at = 0;  // 0: one send
};

bool MakeShape(const std::string& name, Shape* out) {
  std::string reply = "String 0: the initial value";
  reply.resize(kv::kFrameSize, '\0');
  if (name == "exact") {
    out->bytes = reply;
  } else if (name == "long") {
    out->bytes = reply + std::string(50, 'x');
  } else if (name == "split") {
    out->bytes = reply + std::string(50, 'x');
    out->split_at = kv::kFrameSize;
  } else if (name == "huge") {
    out->bytes = reply + std::string(kHugeExtra, 'x');
  } else {
    return false;
  }
  return true;
}

bool SendAll(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t w = ::send(fd, data, size, MSG_NOSIGNAL);
    if (w <= 0) return false;  // the peer left (a reset after a long reply is expected)
    data += w;
    size -= static_cast<std::size_t>(w);
  }
  return true;
}

// Serves one connection: every whole request gets one reply of `shape`.
void Serve(int raw_fd, const Shape* shape) {
  kv::UniqueFd fd(raw_fd);
  const int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // split: two segments
  timeval tv{5, 0};  // a silent peer cannot keep the thread forever
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  char request[kv::kFrameSize];
  for (;;) {
    std::size_t got = 0;
    while (got < kv::kFrameSize) {
      const ssize_t r = ::recv(fd.get(), request + got, kv::kFrameSize - got, 0);
      if (r <= 0) return;
      got += static_cast<std::size_t>(r);
    }
    const std::string& b = shape->bytes;
    if (shape->split_at == 0) {
      if (!SendAll(fd.get(), b.data(), b.size())) return;
    } else if (!SendAll(fd.get(), b.data(), shape->split_at) ||
               !SendAll(fd.get(), b.data() + shape->split_at, b.size() - shape->split_at)) {
      return;
    }
  }
}

int Usage(const char* why) {
  std::fprintf(stderr,
               "wrong_length_server: %s\nusage: wrong_length_server <n> <ip> <port> "
               "--shape exact|long|split|huge\n",
               why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Shape shape;
  if (argc != 6 || std::strcmp(argv[4], "--shape") != 0) return Usage("bad arguments");
  if (!MakeShape(argv[5], &shape)) return Usage("unknown shape");
  const auto port = static_cast<uint16_t>(std::atoi(argv[3]));
  std::vector<kv::UniqueFd> listeners;
  for (const uint16_t p : {port, kv::KitPortTwin(port)}) {
    kv::SocketAddress address;
    if (!kv::ParseSocketAddress(argv[2], p, &address)) return Usage("bad ip");
    kv::UniqueFd fd;
    if (kv::Status s = kv::ListenTcp(address, &fd); !s.ok()) {
      std::fprintf(stderr, "wrong_length_server: %s\n", s.message().c_str());
      return 1;
    }
    listeners.push_back(std::move(fd));
  }
  std::printf("wrong_length_server: listening on %s:%u and its twin shape=%s\n", argv[2],
              static_cast<unsigned>(port), argv[5]);
  std::fflush(stdout);
  pollfd pfds[2] = {{listeners[0].get(), POLLIN, 0}, {listeners[1].get(), POLLIN, 0}};
  for (;;) {  // until SIGTERM or SIGKILL from the test
    if (::poll(pfds, 2, -1) < 0) continue;
    for (const pollfd& p : pfds) {
      if ((p.revents & POLLIN) == 0) continue;
      const int fd = kv::AcceptConnection(p.fd);
      if (fd >= 0) std::thread(Serve, fd, &shape).detach();
    }
  }
}
