// Authenticated encryption of tier records (kv/tier_record.h): AES-256-GCM (OpenSSL EVP) under a key every replica
// that shares a tier holds (`--cache-tier-key-file`). Without it, whoever can write to the Redis or the disk cache
// directory can plant a record with recomputed checksums for a prompt a tenant has not sent yet, and readers of
// the tier see prompt tokens in clear; with it, a record that was not sealed under the key is rejected, and
// nothing of a prompt but its chain hashes is readable.
//
// Sealed bytes: nonce (12, random per record) | ciphertext (as long as the plaintext) | tag (16). The associated
// data (the record's header) is authenticated with them, so neither can be swapped or edited alone.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace preface::kv {

inline constexpr size_t kSealNonceBytes = 12;
inline constexpr size_t kSealTagBytes = 16;
inline constexpr size_t kSealOverheadBytes = kSealNonceBytes + kSealTagBytes;

class RecordKey {
 public:
  // The key of a secret of at least 16 bytes: SHA-256 of a fixed label and the secret (so any secret string, e.g.
  // `openssl rand -hex 32`, gives a full-strength key, and the same secret gives the same key in every process).
  // Throws preface::Error when the secret is shorter.
  static RecordKey from_secret(std::span<const uint8_t> secret);
  // from_secret of a regular file's contents, trailing newlines removed (util/read_file.h; a FIFO or device is
  // refused). Throws preface::Error naming the file.
  static RecordKey from_file(const std::string& path);

  // Appends nonce | ciphertext | tag of plaintext, authenticating aad with it. Throws preface::Error when OpenSSL
  // fails (no randomness).
  void seal(std::span<const uint8_t> aad, std::span<const uint8_t> plaintext, std::vector<uint8_t>& out) const;
  // The plaintext of sealed bytes made by seal() under this key with this aad; false (out cleared) for anything
  // else: another key, edited bytes or aad, too short. Never throws on any input bytes.
  bool open(std::span<const uint8_t> aad, std::span<const uint8_t> sealed, std::vector<uint8_t>& out) const;

 private:
  std::array<uint8_t, 32> key_{};
};

}  // namespace preface::kv
