// Sealed tier records (kv/record_seal.h, kv/tier_record.h with a RecordKey): a record forged or edited by someone
// without the key is rejected as Unauthenticated, whatever checksums they recompute; sealed records do not carry
// prompt tokens in clear; a disk tier with a key serves only what it sealed.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "kv/disk_tier.h"
#include "kv/record_seal.h"
#include "kv/tier_record.h"
#include "support/shared_data.h"
#include "util/error.h"

namespace preface::kv {
namespace {

namespace fs = std::filesystem;

RecordKey key_of(const std::string& secret) {
  return RecordKey::from_secret(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(secret.data()), secret.size()));
}

// Token ids whose little-endian bytes are unlikely anywhere else in a record.
RecordMeta meta_of(int variant, size_t n_payload) {
  RecordMeta m;
  m.ns = namespace_digest("model", "f16", 4, "rope", "tenant");
  m.parent = m.ns;
  m.tokens = {0x5eed0001 + variant, 0x5eed0002, 0x5eed0003, 0x5eed0004};
  m.hash = chain_hash(m.parent, m.tokens);
  m.model = model_digest("fingerprint");
  m.kv_type = "f16";
  m.block_size = 4;
  m.payload_bytes = n_payload;
  return m;
}

std::vector<uint8_t> payload_of(size_t n, int variant) {
  std::vector<uint8_t> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>((i * 13 + static_cast<size_t>(variant)) % 7);
  return p;
}

RecordStatus decode(const std::vector<uint8_t>& bytes, const RecordMeta& expect, const RecordKey* key) {
  std::vector<uint8_t> payload;
  const RecordStatus st = decode_record(bytes, expect, payload, key);
  EXPECT_EQ(payload.empty(), st != RecordStatus::Ok);
  return st;
}

// Rewrites the checksums of a record after its bytes were edited, as a forger who knows the format would.
void recompute_checksums(std::vector<uint8_t>& b) {
  const HeaderView h = decode_header(b);  // may fail the header checksum: only the lengths are needed
  const size_t header_bytes = record_header_bytes(4);
  const uint64_t payload_sum = XXH3_64bits(b.data() + header_bytes, b.size() - header_bytes);
  for (int i = 0; i < 8; ++i) b[192 + i] = static_cast<uint8_t>(payload_sum >> (8 * i));
  const uint64_t header_sum = XXH3_64bits(b.data(), header_bytes - 8);
  for (int i = 0; i < 8; ++i) b[header_bytes - 8 + i] = static_cast<uint8_t>(header_sum >> (8 * i));
  (void)h;
}

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

bool contains_bytes(const std::vector<uint8_t>& hay, int32_t token) {
  uint8_t needle[4];
  for (int i = 0; i < 4; ++i) needle[i] = static_cast<uint8_t>(static_cast<uint32_t>(token) >> (8 * i));
  return std::search(hay.begin(), hay.end(), needle, needle + 4) != hay.end();
}

TEST(RecordSeal, KeysComeFromSecretsOfAtLeast16Bytes) {
  EXPECT_THROW(key_of("fifteen bytes!!"), Error);
  const RecordKey a = key_of("a shared secret of the replicas"), same = key_of("a shared secret of the replicas");
  const RecordKey other = key_of("another secret of another cluster");
  const std::vector<uint8_t> aad = {1, 2, 3}, plain = {9, 8, 7, 6, 5};
  std::vector<uint8_t> sealed, opened;
  a.seal(aad, plain, sealed);
  EXPECT_EQ(sealed.size(), plain.size() + kSealOverheadBytes);
  ASSERT_TRUE(same.open(aad, sealed, opened));
  EXPECT_EQ(opened, plain);
  EXPECT_FALSE(other.open(aad, sealed, opened));
  EXPECT_TRUE(opened.empty());
  EXPECT_FALSE(a.open(std::vector<uint8_t>{1, 2, 4}, sealed, opened));
  EXPECT_FALSE(a.open(aad, std::span<const uint8_t>(sealed).first(kSealOverheadBytes - 1), opened));
  std::vector<uint8_t> again;
  a.seal(aad, plain, again);
  EXPECT_NE(again, sealed) << "a fresh nonce per record";
}

TEST(RecordSeal, SealedRecordsRoundTripWithoutTokensInClear) {
  const RecordKey key = key_of("a shared secret of the replicas");
  const RecordMeta m = meta_of(0, 600);
  const std::vector<uint8_t> payload = payload_of(600, 0);
  for (const Compression c : {Compression::None, Compression::Zstd}) {
    const auto bytes = encode_record(m, payload, c, &key);
    std::vector<uint8_t> got;
    ASSERT_EQ(decode_record(bytes, m, got, &key), RecordStatus::Ok);
    EXPECT_EQ(got, payload);
    for (const int32_t t : m.tokens) EXPECT_FALSE(contains_bytes(bytes, t)) << "token " << t << " in clear";
    const HeaderView h = decode_header(bytes);
    ASSERT_EQ(h.status, RecordStatus::Ok);
    EXPECT_TRUE(h.sealed);
    EXPECT_EQ(h.meta.hash, m.hash);
    // The same record unsealed shows its tokens: the check above can fail.
    EXPECT_TRUE(contains_bytes(encode_record(m, payload, c), m.tokens[0]));
  }
}

TEST(RecordSeal, ForgedEditedOrUnkeyedRecordsAreUnauthenticated) {
  const RecordKey key = key_of("a shared secret of the replicas");
  const RecordKey attacker = key_of("a guess at the replicas' secret");
  const RecordMeta m = meta_of(0, 300);
  const std::vector<uint8_t> payload = payload_of(300, 0), evil = payload_of(300, 5);
  const auto sealed = encode_record(m, payload, Compression::None, &key);

  // Forged without the key: an unsealed record with valid checksums, or one sealed under another key.
  EXPECT_EQ(decode(encode_record(m, evil, Compression::None), m, &key), RecordStatus::Unauthenticated);
  EXPECT_EQ(decode(encode_record(m, evil, Compression::None, &attacker), m, &key), RecordStatus::Unauthenticated);
  // A sealed record read by a replica without the key is not served either.
  EXPECT_EQ(decode(sealed, m, nullptr), RecordStatus::Unauthenticated);

  // Edited ciphertext, checksums recomputed.
  auto b = sealed;
  b[record_header_bytes(4) + kSealNonceBytes + 10] ^= 0x40;
  recompute_checksums(b);
  EXPECT_EQ(decode(b, m, &key), RecordStatus::Unauthenticated);
  // Another record's sealed payload moved under this header (a replay), checksums recomputed.
  const RecordMeta m2 = meta_of(1, 300);
  const auto other = encode_record(m2, evil, Compression::None, &key);
  b = sealed;
  std::copy(other.begin() + static_cast<ptrdiff_t>(record_header_bytes(4)), other.end(),
            b.begin() + static_cast<ptrdiff_t>(record_header_bytes(4)));
  recompute_checksums(b);
  EXPECT_EQ(decode(b, m, &key), RecordStatus::Unauthenticated);
  // An authenticated header field edited (the compression flag), checksums recomputed.
  b = sealed;
  b[168] = 1;
  recompute_checksums(b);
  EXPECT_EQ(decode(b, m, &key), RecordStatus::Unauthenticated);
  // A sealed header that pretends to hold tokens.
  b = sealed;
  b[200] = 1;
  recompute_checksums(b);
  EXPECT_EQ(decode(b, m, &key), RecordStatus::Mismatch);
  // A lookup for other tokens under the same hash never gets this payload.
  RecordMeta wrong = m;
  wrong.tokens[3] = 7;
  EXPECT_EQ(decode(sealed, wrong, &key), RecordStatus::Mismatch);
  EXPECT_EQ(decode(sealed, m, &key), RecordStatus::Ok);
}

TEST(RecordSeal, RandomDamageNeverOpens) {
  const RecordKey key = key_of("a shared secret of the replicas");
  const RecordMeta m = meta_of(0, 200);
  const auto good = encode_record(m, payload_of(200, 0), Compression::Zstd, &key);
  std::mt19937 rng(11);
  for (int i = 0; i < 1000; ++i) {
    auto b = good;
    const int n_flips = 1 + static_cast<int>(rng() % 3);
    for (int f = 0; f < n_flips; ++f) b[rng() % b.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
    if (i % 2 == 0) recompute_checksums(b);
    if (b == good) continue;  // only checksum bytes were hit, and recomputing restored them
    EXPECT_NE(decode(b, m, &key), RecordStatus::Ok);
  }
}

TEST(RecordSeal, KeyFileIsReadAndTrimmed) {
  const fs::path dir = test::temp_dir("record-seal-key");
  const fs::path a = dir / "a", b = dir / "b", short_key = dir / "short";
  write_file(a, "0123456789abcdef0123456789abcdef\n");
  write_file(b, "0123456789abcdef0123456789abcdef");
  write_file(short_key, "short\n");
  const RecordKey ka = RecordKey::from_file(a.string()), kb = RecordKey::from_file(b.string());
  const std::vector<uint8_t> aad = {1}, plain = {2, 3};
  std::vector<uint8_t> sealed, opened;
  ka.seal(aad, plain, sealed);
  EXPECT_TRUE(kb.open(aad, sealed, opened)) << "a trailing newline is not part of the secret";
  EXPECT_THROW(RecordKey::from_file(short_key.string()), Error);
  EXPECT_THROW(RecordKey::from_file((dir / "missing").string()), Error);
}

// A disk tier with a key seals what it writes and refuses, counted, records that were not sealed under it: those a
// keyless replica wrote (or anyone who can write to the directory), and a keyed tier's records seen without it.
TEST(RecordSeal, DiskTierServesOnlyWhatItsKeySealed) {
  const std::string dir = (test::temp_dir("record-seal-disk") / "kv").string();
  fs::remove_all(dir);
  const auto key = std::make_shared<const RecordKey>(key_of("a shared secret of the replicas"));
  const RecordMeta keyed = meta_of(0, 100), plain = meta_of(1, 100);
  const auto opts = [&](std::shared_ptr<const RecordKey> k) {
    DiskTierOptions o;
    o.dir = dir;
    o.max_bytes = 1 << 20;
    o.model = model_digest("fingerprint");
    o.key = std::move(k);
    return o;
  };
  {
    DiskTier sealed_tier(opts(key));
    sealed_tier.offer(keyed, std::make_shared<std::vector<uint8_t>>(payload_of(100, 0)));
    DiskTier plain_tier(opts(nullptr));  // a replica without the key, same directory
    plain_tier.offer(plain, std::make_shared<std::vector<uint8_t>>(payload_of(100, 1)));
    sealed_tier.flush(5000);
    plain_tier.flush(5000);
  }
  DiskTier t(opts(key));
  EXPECT_EQ(t.fetch(std::span<const RecordMeta>(&keyed, 1)).size(), 1u);
  EXPECT_TRUE(t.fetch(std::span<const RecordMeta>(&plain, 1)).empty());
  EXPECT_EQ(t.stats().n_rejected[static_cast<size_t>(RecordStatus::Unauthenticated)], 1);
  DiskTier keyless(opts(nullptr));
  EXPECT_TRUE(keyless.fetch(std::span<const RecordMeta>(&keyed, 1)).empty());
  EXPECT_EQ(keyless.stats().n_rejected[static_cast<size_t>(RecordStatus::Unauthenticated)], 1);
}

}  // namespace
}  // namespace preface::kv
