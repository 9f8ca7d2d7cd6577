#include "kv/hash.h"

#include <openssl/evp.h>

#include <algorithm>
#include <memory>

#include "util/error.h"

namespace preface::kv {
namespace {

struct MdCtxFree {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};
using MdCtx = std::unique_ptr<EVP_MD_CTX, MdCtxFree>;

// One incremental SHA-256 computation.
class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new()) {
    if (!ctx_ || EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) != 1) throw Error("SHA-256: EVP init failed");
  }
  void update(const void* data, size_t n_bytes) {
    if (n_bytes > 0 && EVP_DigestUpdate(ctx_.get(), data, n_bytes) != 1) throw Error("SHA-256: EVP update failed");
  }
  void update_u64_le(uint64_t v) {
    std::array<uint8_t, 8> le{};  // [8] little-endian bytes of v
    for (size_t i = 0; i < le.size(); ++i) le[i] = static_cast<uint8_t>(v >> (8 * i));
    update(le.data(), le.size());
  }
  // Length-prefixed field: (u64 LE byte length, bytes).
  void update_field(std::string_view s) {
    update_u64_le(s.size());
    update(s.data(), s.size());
  }
  void update_tokens_le(std::span<const int32_t> tokens) {
    std::array<uint8_t, 256> buf{};  // [64 tokens * 4 bytes] little-endian staging
    size_t n_buf_bytes = 0;
    for (const int32_t t : tokens) {
      const auto u = static_cast<uint32_t>(t);
      for (int b = 0; b < 4; ++b) buf[n_buf_bytes++] = static_cast<uint8_t>(u >> (8 * b));
      if (n_buf_bytes == buf.size()) {
        update(buf.data(), n_buf_bytes);
        n_buf_bytes = 0;
      }
    }
    update(buf.data(), n_buf_bytes);
  }
  Digest finish() {
    Digest d;
    unsigned int n_out = 0;
    if (EVP_DigestFinal_ex(ctx_.get(), d.bytes.data(), &n_out) != 1 || n_out != d.bytes.size()) {
      throw Error("SHA-256: EVP final failed");
    }
    return d;
  }

 private:
  MdCtx ctx_;
};

}  // namespace

Digest sha256(std::span<const uint8_t> data) {
  Sha256 h;
  h.update(data.data(), data.size());
  return h.finish();
}

Digest chain_hash(const Digest& parent, std::span<const int32_t> block_tokens) {
  Sha256 h;
  h.update(parent.bytes.data(), parent.bytes.size());
  h.update_tokens_le(block_tokens);
  return h.finish();
}

std::vector<Digest> block_hashes(const Digest& ns, std::span<const int32_t> tokens, int32_t block_size) {
  if (block_size <= 0) throw Error("block_hashes: block size must be positive, got " + std::to_string(block_size));
  const size_t n_full_blocks = tokens.size() / static_cast<size_t>(block_size);
  std::vector<Digest> hashes;  // [n_full_blocks]
  hashes.reserve(n_full_blocks);
  Digest parent = ns;
  for (size_t i = 0; i < n_full_blocks; ++i) {
    parent = chain_hash(parent, tokens.subspan(i * block_size, block_size));
    hashes.push_back(parent);
  }
  return hashes;
}

Digest namespace_digest(std::string_view model_fingerprint, std::string_view kv_type, int block_size,
                        std::string_view rope_desc, std::string_view salt) {
  if (block_size <= 0) throw Error("namespace_digest: block size must be positive, got " + std::to_string(block_size));
  Sha256 h;
  h.update_field("preface.kv.namespace.v1");
  h.update_field(model_fingerprint);
  h.update_field(kv_type);
  h.update_u64_le(4);
  const int32_t bs = block_size;
  h.update_tokens_le(std::span<const int32_t>(&bs, 1));
  h.update_field(rope_desc);
  h.update_field(salt);
  return h.finish();
}

std::string to_hex(const Digest& d, int n_hex_chars) {
  static constexpr char kDigits[] = "0123456789abcdef";
  const int n = std::clamp(n_hex_chars, 0, 64);
  std::string out(static_cast<size_t>(n), '0');
  for (int i = 0; i < n; ++i) {
    const uint8_t byte = d.bytes[static_cast<size_t>(i / 2)];
    out[static_cast<size_t>(i)] = kDigits[(i % 2 == 0) ? (byte >> 4) : (byte & 0xf)];
  }
  return out;
}

}  // namespace preface::kv
