// Which address a request comes from when a proxy stands in front (serve --trusted-proxy CIDR, issue 45 item 3).
//
// Behind nginx every connection comes from the proxy's address, so a per-client limit keyed on the peer address
// caps the whole proxy at one client's share. A peer inside one of the trusted networks is taken to be a proxy
// that appends the address it saw to X-Forwarded-For (nginx's $proxy_add_x_forwarded_for); the client is then the
// rightmost address of that list that is not itself a trusted proxy (entries to its left were written by the
// client and prove nothing). A peer outside every trusted network is the client, whatever its headers say.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace preface::server {

// One network: an IPv4 or IPv6 prefix (IPv4 held as ::ffff:a.b.c.d, so an IPv4-mapped peer address matches).
struct Cidr {
  std::array<uint8_t, 16> net{};
  int prefix_bits = 128;  // of the 16-byte form (an IPv4 /24 is 96 + 24)

  // "10.0.0.0/8", "127.0.0.1" (a single address), "fd00::/8", "::1". nullopt when it is not one.
  static std::optional<Cidr> parse(std::string_view text);
  bool contains(std::string_view address) const;  // false for anything that is not an IP address
};

// The 16-byte form of an IPv4 or IPv6 address (IPv4 mapped); nullopt when `address` is not one.
std::optional<std::array<uint8_t, 16>> parse_ip(std::string_view address);

class TrustedProxies {
 public:
  TrustedProxies() = default;
  explicit TrustedProxies(std::vector<Cidr> networks) : networks_(std::move(networks)) {}

  bool empty() const { return networks_.empty(); }
  bool trusted(std::string_view address) const;
  // The client of a request that reached us from `peer` with this X-Forwarded-For value (comma-separated, may be
  // empty): `peer` itself unless it is trusted; else the rightmost untrusted entry; else the leftmost entry when
  // all are trusted; `peer` when the list is empty or its rightmost entry is no address.
  std::string client(const std::string& peer, std::string_view forwarded_for) const;

 private:
  std::vector<Cidr> networks_;
};

}  // namespace preface::server
