// serve --trusted-proxy (issue 45 item 3): networks parse and match in both families, and the client of a request
// is the rightmost X-Forwarded-For entry that is not a trusted proxy, never an address a client wrote itself.
#include "server/http/trusted_proxy.h"

#include <gtest/gtest.h>

namespace preface::server {
namespace {

TEST(Cidr, ParsesAddressesAndNetworksOfBothFamilies) {
  EXPECT_TRUE(Cidr::parse("127.0.0.1"));
  EXPECT_TRUE(Cidr::parse("10.0.0.0/8"));
  EXPECT_TRUE(Cidr::parse(" 192.168.1.0/24 "));
  EXPECT_TRUE(Cidr::parse("::1"));
  EXPECT_TRUE(Cidr::parse("fd00::/8"));
  EXPECT_TRUE(Cidr::parse("0.0.0.0/0"));
  for (const char* bad : {"", "10.0.0.0/33", "10.0.0.0/", "10.0.0.0/x", "10.0.0/8", "fd00::/129", "host.example",
                          "10.0.0.0/8/1", "10.0.0.0/-1", "1.2.3.4 5"}) {
    EXPECT_FALSE(Cidr::parse(bad)) << bad;
  }
}

TEST(Cidr, MatchesByPrefixWithHostBitsIgnored) {
  const Cidr ten = *Cidr::parse("10.1.2.3/8");  // host bits cleared: 10.0.0.0/8
  EXPECT_TRUE(ten.contains("10.0.0.1"));
  EXPECT_TRUE(ten.contains("10.255.255.255"));
  EXPECT_FALSE(ten.contains("11.0.0.1"));
  EXPECT_TRUE(ten.contains("::ffff:10.9.9.9"));  // an IPv4-mapped peer
  EXPECT_FALSE(ten.contains("fd00::1"));
  EXPECT_FALSE(ten.contains("not an address"));
  const Cidr one = *Cidr::parse("127.0.0.1");
  EXPECT_TRUE(one.contains("127.0.0.1"));
  EXPECT_FALSE(one.contains("127.0.0.2"));
  const Cidr ula = *Cidr::parse("fd00::/8");
  EXPECT_TRUE(ula.contains("fd12:3456::1"));
  EXPECT_FALSE(ula.contains("fe80::1"));
  EXPECT_FALSE(ula.contains("10.0.0.1"));
  const Cidr odd = *Cidr::parse("192.168.4.0/22");
  EXPECT_TRUE(odd.contains("192.168.7.255"));
  EXPECT_FALSE(odd.contains("192.168.8.0"));
  EXPECT_TRUE(Cidr::parse("0.0.0.0/0")->contains("8.8.8.8"));
}

TEST(TrustedProxies, ClientIsTheRightmostUntrustedForwardedAddress) {
  const TrustedProxies proxies({*Cidr::parse("127.0.0.1"), *Cidr::parse("10.0.0.0/8")});
  // Not from a proxy: the peer, whatever the header claims.
  EXPECT_EQ(proxies.client("192.0.2.7", "203.0.113.9"), "192.0.2.7");
  // From nginx: the address nginx appended.
  EXPECT_EQ(proxies.client("127.0.0.1", "203.0.113.9"), "203.0.113.9");
  // A client that forges the header only adds entries to the left of the one the proxy wrote.
  EXPECT_EQ(proxies.client("127.0.0.1", "1.1.1.1, 203.0.113.9"), "203.0.113.9");
  // Two proxies in a row (an ingress at 10.x, then nginx): their own addresses are skipped.
  EXPECT_EQ(proxies.client("127.0.0.1", "198.51.100.4,10.0.0.5"), "198.51.100.4");
  // All trusted: the leftmost (the first proxy's own client).
  EXPECT_EQ(proxies.client("127.0.0.1", "10.0.0.6, 10.0.0.5"), "10.0.0.6");
  // No header or a garbled one: the proxy itself.
  EXPECT_EQ(proxies.client("127.0.0.1", ""), "127.0.0.1");
  EXPECT_EQ(proxies.client("127.0.0.1", " , "), "127.0.0.1");
  EXPECT_EQ(proxies.client("127.0.0.1", "evil"), "127.0.0.1");
  EXPECT_EQ(proxies.client("127.0.0.1", "evil, 10.0.0.5"), "10.0.0.5");
  EXPECT_EQ(TrustedProxies().client("127.0.0.1", "203.0.113.9"), "127.0.0.1");
}

}  // namespace
}  // namespace preface::server
