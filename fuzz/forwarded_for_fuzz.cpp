// Fuzz target: the client address behind a trusted proxy (server/http/trusted_proxy.h), read from an
// X-Forwarded-For header any client can write. Input: a line of comma-separated networks (--trusted-proxy), a line
// with the peer address, then the header's value.
// Checks: Cidr::parse and TrustedProxies::client never throw; a parsed network contains the address it was written
// with; the client is the peer, or an entry of the header that is an IP address; a peer outside the trusted
// networks is always its own client; a client other than the peer is never itself trusted unless every entry was.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "server/http/trusted_proxy.h"
#include "support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace preface::server;
  namespace fuzz = preface::fuzz;
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t nl1 = in.find('\n');
  const size_t nl2 = nl1 == std::string_view::npos ? std::string_view::npos : in.find('\n', nl1 + 1);
  const std::string_view nets = in.substr(0, nl1);
  const std::string peer(nl1 == std::string_view::npos ? std::string_view() : in.substr(nl1 + 1, nl2 - nl1 - 1));
  const std::string_view header = nl2 == std::string_view::npos ? std::string_view() : in.substr(nl2 + 1);

  std::vector<Cidr> networks;
  for (size_t start = 0; start <= nets.size();) {
    const size_t comma = std::min(nets.find(',', start), nets.size());
    const std::string_view text = nets.substr(start, comma - start);
    if (const auto c = Cidr::parse(text)) {
      const std::string_view address = text.substr(0, text.find('/'));
      fuzz::check(c->contains(address), "a network does not contain the address it was written with");
      networks.push_back(*c);
    }
    start = comma + 1;
  }
  const TrustedProxies proxies(networks);
  const std::string client = proxies.client(peer, header);
  if (!proxies.trusted(peer)) {
    fuzz::check(client == peer, "an untrusted peer's header was believed");
    return 0;
  }
  if (client == peer) return 0;
  fuzz::check(parse_ip(client).has_value(), "the client is not an IP address");
  fuzz::check(std::string_view(header).find(client) != std::string_view::npos, "the client is not in the header");
  return 0;
}
