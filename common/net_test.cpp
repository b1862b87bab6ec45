// Socket addresses (net.h): both families through the one parse and format.
#include "common/net.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <string>
#include <utility>

namespace kv {
namespace {

TEST(NetTest, ParsesAndFormatsBothFamilies) {
  const std::pair<const char*, const char*> cases[] = {
      {"127.0.0.1", "127.0.0.1:3000"},
      {"0.0.0.0", "0.0.0.0:3000"},
      {"::1", "[::1]:3000"},
      {"fe80::1:2", "[fe80::1:2]:3000"},
      {"::ffff:10.0.0.1", "[::ffff:10.0.0.1]:3000"},
  };
  for (const auto& [ip, formatted] : cases) {
    SocketAddress a;
    ASSERT_TRUE(ParseSocketAddress(ip, 3000, &a)) << ip;
    EXPECT_EQ(FormatSocketAddress(a), formatted);
  }
}

TEST(NetTest, FillsTheFamilysOwnSockaddr) {
  SocketAddress a;
  ASSERT_TRUE(ParseSocketAddress("10.1.2.3", 47115, &a));
  ASSERT_EQ(a.storage.ss_family, AF_INET);
  ASSERT_EQ(a.length, sizeof(sockaddr_in));
  const auto* v4 = reinterpret_cast<const sockaddr_in*>(&a.storage);
  EXPECT_EQ(ntohs(v4->sin_port), 47115);
  EXPECT_EQ(ntohl(v4->sin_addr.s_addr), 0x0a010203u);

  ASSERT_TRUE(ParseSocketAddress("2001:db8::7", 1, &a));
  ASSERT_EQ(a.storage.ss_family, AF_INET6);
  ASSERT_EQ(a.length, sizeof(sockaddr_in6));
  const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a.storage);
  EXPECT_EQ(ntohs(v6->sin6_port), 1);
  EXPECT_EQ(v6->sin6_addr.s6_addr[0], 0x20);
  EXPECT_EQ(v6->sin6_addr.s6_addr[15], 0x07);
}

TEST(NetTest, RefusesWhatIsNotANumericAddress) {
  for (const char* ip : {"", "localhost", "300.1.1.1", "127.0.0.1 ", " ::1", "127.1", "1.2.3",
                         "::1%lo", "[::1]", "1::2::3"}) {
    SocketAddress a;
    EXPECT_FALSE(ParseSocketAddress(ip, 3000, &a)) << ip;
    EXPECT_EQ(a.length, 0u) << ip;
    EXPECT_EQ(a.storage.ss_family, 0) << ip;
  }
}

}  // namespace
}  // namespace kv
