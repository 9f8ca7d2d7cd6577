// SHA-256 helpers: known vectors, the chain encoding (little-endian int32 after the parent), namespace field
// separation, the digests quoted in docs/design/kv-cache.md, and no collisions among many distinct blocks.
#include "kv/hash.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "util/error.h"

namespace preface::kv {
namespace {

using Ids = std::vector<int32_t>;

constexpr int32_t kBlockSize = 4;
constexpr char kModel[] = "demo-model";
constexpr char kRope[] = "rope:neox,base=10000,dim=64";

Digest demo_ns(std::string_view salt = "") { return namespace_digest(kModel, "f16", kBlockSize, kRope, salt); }

Ids iota(int32_t first, int32_t n) {
  Ids v(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = first + i;
  return v;
}

TEST(KvHash, Sha256KnownVectors) {
  const uint8_t abc[3] = {'a', 'b', 'c'};
  EXPECT_EQ(to_hex(sha256(abc)), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(to_hex(sha256({})), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(to_hex(sha256(abc), 8), "ba7816bf");
  EXPECT_EQ(to_hex(sha256(abc), 100).size(), 64u);
}

TEST(KvHash, ChainHashIsSha256OfParentThenLittleEndianInt32) {
  const Digest parent = sha256({});
  const Ids tokens = {1, -2, 0x01020304, 300};
  std::vector<uint8_t> bytes(parent.bytes.begin(), parent.bytes.end());  // [32 + 4 * 4]
  for (const uint8_t b : {1, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff, 4, 3, 2, 1, 0x2c, 1, 0, 0}) bytes.push_back(b);
  EXPECT_EQ(chain_hash(parent, tokens), sha256(bytes));

  // More than one 64-token staging buffer.
  const Ids long_block = iota(-100, 150);
  std::vector<uint8_t> long_bytes(parent.bytes.begin(), parent.bytes.end());
  for (const int32_t t : long_block) {
    for (int b = 0; b < 4; ++b) long_bytes.push_back(static_cast<uint8_t>(static_cast<uint32_t>(t) >> (8 * b)));
  }
  EXPECT_EQ(chain_hash(parent, long_block), sha256(long_bytes));

  const auto hashes = block_hashes(parent, iota(1, 10), kBlockSize);
  ASSERT_EQ(hashes.size(), 2u);
  EXPECT_EQ(hashes[0], chain_hash(parent, iota(1, 4)));
  EXPECT_EQ(hashes[1], chain_hash(hashes[0], iota(5, 4)));
  EXPECT_THROW(block_hashes(parent, iota(1, 4), 0), Error);
}

TEST(KvHash, NamespaceDigestSeparatesEveryField) {
  const Digest base = namespace_digest("m", "f16", 16, "rope", "");
  std::unordered_set<Digest, DigestHash> seen = {base};
  EXPECT_TRUE(seen.insert(namespace_digest("m2", "f16", 16, "rope", "")).second);
  EXPECT_TRUE(seen.insert(namespace_digest("m", "bf16", 16, "rope", "")).second);
  EXPECT_TRUE(seen.insert(namespace_digest("m", "f16", 32, "rope", "")).second);
  EXPECT_TRUE(seen.insert(namespace_digest("m", "f16", 16, "rope2", "")).second);
  EXPECT_TRUE(seen.insert(namespace_digest("m", "f16", 16, "rope", "tenant")).second);
  // Length prefixes: moving a byte across a field boundary changes the digest.
  EXPECT_TRUE(seen.insert(namespace_digest("mf", "16", 16, "rope", "")).second);
  EXPECT_TRUE(seen.insert(namespace_digest("m", "f16", 16, "", "rope")).second);
  EXPECT_EQ(namespace_digest("m", "f16", 16, "rope", ""), base);
  EXPECT_THROW(namespace_digest("m", "f16", 0, "rope", ""), Error);
}

// The digests quoted in docs/design/kv-cache.md (cross-checked with Python's hashlib when written).
TEST(KvHash, DocWorkedExampleDigests) {
  const Digest ns = demo_ns();
  EXPECT_EQ(to_hex(ns), "84f4a141be4ce2d7f84f75d08f1c0399af7864210272413139691b114a6bac6f");
  EXPECT_EQ(to_hex(demo_ns("tenant-b"), 12), "1ac933c7e09c");
  const auto a = block_hashes(ns, iota(1, 12), kBlockSize);
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(to_hex(a[0]), "7b739a00cebe687f42260a2b535da9333382a0731e1ffca4fbfe95eadc4a1bfe");
  EXPECT_EQ(to_hex(a[1], 12), "0a1821b79ad3");
  EXPECT_EQ(to_hex(a[2], 12), "a1ad73d4716a");
  const auto b = block_hashes(ns, Ids{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 20, 21, 22}, kBlockSize);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(to_hex(b[2], 12), "871a95402a10");
  EXPECT_EQ(to_hex(block_hashes(demo_ns("tenant-b"), iota(1, 4), kBlockSize)[0], 12), "ce8108aee45e");
}

TEST(KvHash, DistinctBlocksNeverShareAChainHash) {
  std::mt19937 rng(7);
  std::unordered_map<Digest, std::pair<int, Ids>, DigestHash> seen;  // hash -> (root index, block tokens)
  int32_t n_collisions = 0;
  const Digest roots[2] = {demo_ns(), demo_ns("tenant-b")};
  auto add = [&](int root, const Ids& block) {
    const auto [it, fresh] = seen.try_emplace(chain_hash(roots[root], block), root, block);
    if (!fresh && it->second != std::pair<int, Ids>(root, block)) ++n_collisions;
  };
  for (int i = 0; i < 5000; ++i) {
    Ids block(kBlockSize);  // a small vocabulary, so random blocks also repeat
    for (auto& t : block) t = static_cast<int32_t>(rng() % 10);
    // Variants a sloppy encoding would merge: a token differing only above its low byte, swapped tokens.
    Ids high_byte = block;
    high_byte[0] += 256;
    Ids swapped = block;
    std::swap(swapped[1], swapped[2]);
    for (int root = 0; root < 2; ++root) {
      add(root, block);
      add(root, high_byte);
      add(root, swapped);
    }
  }
  EXPECT_EQ(n_collisions, 0);
  EXPECT_GT(seen.size(), 10000u);  // many distinct blocks were hashed
}

}  // namespace
}  // namespace preface::kv
