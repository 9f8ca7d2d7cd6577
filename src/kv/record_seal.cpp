#include "kv/record_seal.h"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <algorithm>
#include <climits>
#include <memory>
#include <string_view>

#include "kv/hash.h"
#include "util/error.h"
#include "util/read_file.h"

namespace preface::kv {
namespace {

constexpr std::string_view kKeyLabel = "preface tier record key v1";
constexpr size_t kMinSecretBytes = 16;

struct CtxFree {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};
using Ctx = std::unique_ptr<EVP_CIPHER_CTX, CtxFree>;

// OpenSSL takes int lengths: records are far below 2^31 bytes, but a caller's span is checked anyway.
bool fits_int(size_t n) { return n <= static_cast<size_t>(INT_MAX); }

}  // namespace

RecordKey RecordKey::from_secret(std::span<const uint8_t> secret) {
  if (secret.size() < kMinSecretBytes) {
    throw Error("a tier key secret needs at least " + std::to_string(kMinSecretBytes) + " bytes (got " +
                std::to_string(secret.size()) + ")");
  }
  std::vector<uint8_t> material(kKeyLabel.begin(), kKeyLabel.end());
  material.push_back(0);
  material.insert(material.end(), secret.begin(), secret.end());
  RecordKey k;
  const Digest d = sha256(material);
  std::copy(d.bytes.begin(), d.bytes.end(), k.key_.begin());
  return k;
}

RecordKey RecordKey::from_file(const std::string& path) {
  std::string text = read_regular_file(path, 1 << 16, "tier key file");
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  try {
    return from_secret(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
  } catch (const Error& e) {
    throw Error("tier key file " + path + ": " + e.what());
  }
}

void RecordKey::seal(std::span<const uint8_t> aad, std::span<const uint8_t> plaintext,
                     std::vector<uint8_t>& out) const {
  if (!fits_int(aad.size()) || !fits_int(plaintext.size())) throw Error("seal: record too large");
  const size_t at = out.size();
  out.resize(at + kSealNonceBytes + plaintext.size() + kSealTagBytes);
  uint8_t* nonce = out.data() + at;
  uint8_t* ct = nonce + kSealNonceBytes;
  uint8_t* tag = ct + plaintext.size();
  if (RAND_bytes(nonce, static_cast<int>(kSealNonceBytes)) != 1) throw Error("seal: no randomness for a nonce");
  std::array<uint8_t, 16> final_block{};  // GCM writes nothing at the end
  const Ctx ctx(EVP_CIPHER_CTX_new());
  int n = 0;
  const bool ok =
      ctx && EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key_.data(), nonce) == 1 &&
      EVP_EncryptUpdate(ctx.get(), nullptr, &n, aad.data(), static_cast<int>(aad.size())) == 1 &&
      (plaintext.empty() ||
       EVP_EncryptUpdate(ctx.get(), ct, &n, plaintext.data(), static_cast<int>(plaintext.size())) == 1) &&
      EVP_EncryptFinal_ex(ctx.get(), final_block.data(), &n) == 1 &&
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, static_cast<int>(kSealTagBytes), tag) == 1;
  if (!ok) throw Error("seal: AES-256-GCM failed");
}

bool RecordKey::open(std::span<const uint8_t> aad, std::span<const uint8_t> sealed, std::vector<uint8_t>& out) const {
  out.clear();
  if (sealed.size() < kSealOverheadBytes || !fits_int(aad.size()) || !fits_int(sealed.size())) return false;
  const uint8_t* nonce = sealed.data();
  const uint8_t* ct = nonce + kSealNonceBytes;
  const size_t n_ct = sealed.size() - kSealOverheadBytes;
  std::array<uint8_t, kSealTagBytes> tag{};
  std::copy_n(ct + n_ct, kSealTagBytes, tag.begin());
  out.resize(n_ct);
  std::array<uint8_t, 16> final_block{};  // GCM writes nothing at the end; a buffer that exists even when n_ct is 0
  const Ctx ctx(EVP_CIPHER_CTX_new());
  int n = 0;
  const bool ok =
      ctx && EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key_.data(), nonce) == 1 &&
      EVP_DecryptUpdate(ctx.get(), nullptr, &n, aad.data(), static_cast<int>(aad.size())) == 1 &&
      (n_ct == 0 || EVP_DecryptUpdate(ctx.get(), out.data(), &n, ct, static_cast<int>(n_ct)) == 1) &&
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, static_cast<int>(kSealTagBytes), tag.data()) == 1 &&
      EVP_DecryptFinal_ex(ctx.get(), final_block.data(), &n) == 1;
  if (!ok) out.clear();
  return ok;
}

}  // namespace preface::kv
