// SHA-256 digests that name cached K/V: the namespace root of a cache and the chain hash of each full block.
//
//   h_0 = namespace_digest(model fingerprint, kv type, block size, rope settings, tenant salt)
//   h_i = SHA-256(h_{i-1} || token ids of block i, each as a little-endian int32)      (32 + 4 * block_size bytes)
//
// h_i names the K/V rows of block i *given everything before it*: two blocks share a hash only when their whole
// token prefix and namespace agree (up to a SHA-256 collision, which the prefix index also guards against by
// comparing the stored token ids on every hit).
#pragma once
#include <array>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace preface::kv {

struct Digest {
  std::array<uint8_t, 32> bytes{};  // [32] SHA-256 output, big-endian as printed by sha256sum
  auto operator<=>(const Digest&) const = default;
};

// For unordered containers: the first 8 bytes of a SHA-256 digest are already uniformly distributed.
struct DigestHash {
  size_t operator()(const Digest& d) const noexcept {
    size_t h = 0;
    std::memcpy(&h, d.bytes.data(), sizeof(h));
    return h;
  }
};

// SHA-256 of `data` (OpenSSL EVP). Throws preface::Error only if libcrypto itself fails.
Digest sha256(std::span<const uint8_t> data);

// h_i = SHA-256(parent || token ids as little-endian int32). `block_tokens` is one full block (any length is
// hashed; the pool checks the length).
Digest chain_hash(const Digest& parent, std::span<const int32_t> block_tokens);

// The chain hashes of every full block of `tokens` ([n_tokens / block_size] digests, block 0 first), rooted at
// `ns`. The trailing partial block is not hashed. Throws preface::Error when block_size <= 0.
std::vector<Digest> block_hashes(const Digest& ns, std::span<const int32_t> tokens, int32_t block_size);

// The cache namespace h_0: SHA-256 over a versioned tag and each field as (u64 little-endian byte length, bytes);
// block_size is encoded as a 4-byte little-endian int32 field. Length prefixes make the encoding injective
// ("ab","c" and "a","bc" differ). Anything that changes the K/V bytes for the same tokens (model weights,
// KV dtype, block size, RoPE settings) or must not share a cache (tenant salt) belongs in a field.
// Throws preface::Error when block_size <= 0.
Digest namespace_digest(std::string_view model_fingerprint, std::string_view kv_type, int block_size,
                        std::string_view rope_desc, std::string_view salt);

// Lower-case hex of the first n_hex_chars (clamped to [0, 64]) hex digits; to_hex(d) is the full 64.
std::string to_hex(const Digest& d, int n_hex_chars = 64);

}  // namespace preface::kv
