#include "server/http/trusted_proxy.h"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <cstring>

namespace preface::server {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::optional<std::array<uint8_t, 16>> parse_ip(std::string_view address) {
  address = trim(address);
  if (address.empty() || address.size() > INET6_ADDRSTRLEN) return std::nullopt;
  const std::string text(address);
  std::array<uint8_t, 16> out{};
  in_addr v4{};
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) {
    out[10] = out[11] = 0xff;
    std::memcpy(out.data() + 12, &v4, 4);
    return out;
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, text.c_str(), &v6) == 1) {
    std::memcpy(out.data(), &v6, 16);
    return out;
  }
  return std::nullopt;
}

std::optional<Cidr> Cidr::parse(std::string_view text) {
  text = trim(text);
  const size_t slash = text.find('/');
  const auto ip = parse_ip(text.substr(0, slash));
  if (!ip) return std::nullopt;
  const bool v4 = text.substr(0, slash).find(':') == std::string_view::npos;
  const int max_bits = v4 ? 32 : 128;
  int bits = max_bits;
  if (slash != std::string_view::npos) {
    const std::string_view b = text.substr(slash + 1);
    const auto [end, ec] = std::from_chars(b.data(), b.data() + b.size(), bits);
    if (b.empty() || ec != std::errc() || end != b.data() + b.size() || bits < 0 || bits > max_bits) return std::nullopt;
  }
  Cidr c;
  c.prefix_bits = v4 ? 96 + bits : bits;
  for (int i = 0; i < 16; ++i) {  // the host bits cleared, so "10.1.2.3/8" is 10.0.0.0/8
    const int keep = std::clamp(c.prefix_bits - 8 * i, 0, 8);
    c.net[static_cast<size_t>(i)] = static_cast<uint8_t>((*ip)[static_cast<size_t>(i)] & (0xff00 >> keep));
  }
  return c;
}

bool Cidr::contains(std::string_view address) const {
  const auto ip = parse_ip(address);
  if (!ip) return false;
  for (int i = 0; i < 16; ++i) {
    const int keep = std::clamp(prefix_bits - 8 * i, 0, 8);
    const auto mask = static_cast<uint8_t>(0xff00 >> keep);
    if (((*ip)[static_cast<size_t>(i)] & mask) != net[static_cast<size_t>(i)]) return false;
  }
  return true;
}

bool TrustedProxies::trusted(std::string_view address) const {
  for (const Cidr& c : networks_) {
    if (c.contains(address)) return true;
  }
  return false;
}

std::string TrustedProxies::client(const std::string& peer, std::string_view forwarded_for) const {
  if (!trusted(peer)) return peer;
  std::string_view rest = forwarded_for;
  std::string leftmost = peer;
  bool first = true;
  while (!trim(rest).empty()) {
    const size_t comma = rest.rfind(',');
    const std::string_view entry = trim(comma == std::string_view::npos ? rest : rest.substr(comma + 1));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(0, comma);
    if (!parse_ip(entry)) return first ? peer : leftmost;  // a malformed hop: the last address that was sound
    if (!trusted(entry)) return std::string(entry);
    leftmost = std::string(entry);
    first = false;
  }
  return leftmost;
}

}  // namespace preface::server
