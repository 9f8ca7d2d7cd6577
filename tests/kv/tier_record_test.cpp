// The block record codec (kv/tier_record.h) and the disk tier's store (kv/disk_tier.h) without an engine: every
// field is checked, every damage is named, no input bytes make the decoder throw or serve a payload.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <random>

#include "kv/disk_tier.h"
#include "kv/tier_queue.h"
#include "kv/tier_record.h"
#include "support/shared_data.h"

namespace preface::kv {
namespace {

namespace fs = std::filesystem;

struct Sample {
  RecordMeta meta;
  std::vector<uint8_t> payload;
};

Sample sample(int variant = 0, size_t n_payload = 1000) {
  Sample s;
  s.meta.ns = namespace_digest("model", "f16", 4, "rope", "tenant" + std::to_string(variant));
  s.meta.parent = s.meta.ns;
  s.meta.tokens = {1 + variant, 2, 3, 4};
  s.meta.hash = chain_hash(s.meta.parent, s.meta.tokens);
  s.meta.model = model_digest("fingerprint");
  s.meta.kv_type = "f16";
  s.meta.block_size = 4;
  s.meta.payload_bytes = n_payload;
  s.payload.resize(n_payload);
  for (size_t i = 0; i < n_payload; ++i) s.payload[i] = static_cast<uint8_t>((i * 31 + variant) % 251 / 8);
  return s;
}

RecordStatus decode(const std::vector<uint8_t>& bytes, const RecordMeta& expect) {
  std::vector<uint8_t> payload;
  const RecordStatus st = decode_record(bytes, expect, payload);
  EXPECT_EQ(payload.empty(), st != RecordStatus::Ok);
  return st;
}

TEST(TierRecord, RoundTripsWithAndWithoutCompression) {
  const Sample s = sample();
  for (const Compression c : {Compression::None, Compression::Zstd}) {
    const auto bytes = encode_record(s.meta, s.payload, c);
    std::vector<uint8_t> payload;
    ASSERT_EQ(decode_record(bytes, s.meta, payload), RecordStatus::Ok);
    EXPECT_EQ(payload, s.payload);
    const HeaderView h = decode_header(bytes);
    ASSERT_EQ(h.status, RecordStatus::Ok);
    EXPECT_EQ(h.meta.tokens, s.meta.tokens);
    EXPECT_EQ(h.header_bytes, record_header_bytes(4));
    EXPECT_EQ(h.header_bytes + h.stored_bytes, bytes.size());
    if (c == Compression::Zstd) {
      EXPECT_LT(bytes.size(), s.payload.size()) << "a compressible payload shrinks";
    }
  }
}

TEST(TierRecord, EveryExpectedFieldIsChecked) {
  const Sample s = sample();
  const auto bytes = encode_record(s.meta, s.payload, Compression::None);
  const auto with = [&](auto change) {
    RecordMeta m = s.meta;
    change(m);
    return decode(bytes, m);
  };
  EXPECT_EQ(with([](RecordMeta& m) { m.model = model_digest("another file"); }), RecordStatus::OtherModel);
  EXPECT_EQ(with([](RecordMeta& m) { m.kv_type = "q8_0"; }), RecordStatus::KvLayout);
  EXPECT_EQ(with([](RecordMeta& m) { m.block_size = 8; }), RecordStatus::KvLayout);
  EXPECT_EQ(with([](RecordMeta& m) { m.payload_bytes = 999; }), RecordStatus::KvLayout);
  EXPECT_EQ(with([](RecordMeta& m) { m.ns.bytes[0] ^= 1; }), RecordStatus::Mismatch);
  EXPECT_EQ(with([](RecordMeta& m) { m.hash.bytes[5] ^= 1; }), RecordStatus::Mismatch);
  EXPECT_EQ(with([](RecordMeta& m) { m.parent.bytes[9] ^= 1; }), RecordStatus::Mismatch);
  EXPECT_EQ(with([](RecordMeta& m) { m.tokens[2] = 77; }), RecordStatus::Mismatch);
}

TEST(TierRecord, DamageIsNamed) {
  const Sample s = sample();
  const auto good = encode_record(s.meta, s.payload, Compression::None);
  auto b = good;
  b[0] = 'X';
  EXPECT_EQ(decode(b, s.meta), RecordStatus::BadMagic);
  b = good;
  b[8] = 2;  // format version
  EXPECT_EQ(decode(b, s.meta), RecordStatus::Version);
  b = good;
  b[100] ^= 0x10;  // inside the parent hash
  EXPECT_EQ(decode(b, s.meta), RecordStatus::HeaderChecksum);
  b = good;
  b.back() ^= 0x01;
  EXPECT_EQ(decode(b, s.meta), RecordStatus::PayloadChecksum);
  b = good;
  b.pop_back();
  EXPECT_EQ(decode(b, s.meta), RecordStatus::Truncated);
  b = good;
  b.push_back(0);
  EXPECT_EQ(decode(b, s.meta), RecordStatus::Truncated);
  for (size_t n = 0; n < good.size(); n += 7) {
    EXPECT_NE(decode(std::vector<uint8_t>(good.begin(), good.begin() + static_cast<ptrdiff_t>(n)), s.meta),
              RecordStatus::Ok)
        << "prefix of " << n << " bytes";
  }
  // A header naming tokens its hash was not computed from (a forged or mis-encoded record).
  Sample forged = sample();
  forged.meta.tokens = {9, 9, 9, 9};
  EXPECT_EQ(decode_header(encode_record(forged.meta, forged.payload, Compression::None)).status,
            RecordStatus::Mismatch);
}

TEST(TierRecord, CorruptCompressedPayloadIsRejected) {
  const Sample s = sample();
  auto b = encode_record(s.meta, s.payload, Compression::Zstd);
  b[b.size() - 3] ^= 0xff;
  EXPECT_EQ(decode(b, s.meta), RecordStatus::PayloadChecksum);
}

TEST(TierRecord, RandomBytesNeverDecode) {
  std::mt19937 rng(7);
  const Sample s = sample();
  const auto good = encode_record(s.meta, s.payload, Compression::Zstd);
  for (int i = 0; i < 2000; ++i) {
    auto b = good;
    const int n_flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < n_flips; ++f) b[rng() % b.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
    EXPECT_NE(decode(b, s.meta), RecordStatus::Ok);
  }
}

TEST(TierQueue, RefusesWhenFullAndServesPendingRecords) {
  std::mutex gate;
  gate.lock();  // the writer blocks on the first item until released
  std::vector<Digest> written;
  TierQueue q(2500, [&](const TierWrite& w) {
    std::lock_guard g(gate);
    written.push_back(w.meta.hash);
  });
  const Sample a = sample(0), b = sample(1), c = sample(2);
  ASSERT_TRUE(q.push({a.meta, std::make_shared<std::vector<uint8_t>>(a.payload), std::nullopt}));
  ASSERT_TRUE(q.push({b.meta, std::make_shared<std::vector<uint8_t>>(b.payload), std::nullopt}));
  EXPECT_FALSE(q.push({c.meta, std::make_shared<std::vector<uint8_t>>(c.payload), std::nullopt})) << "2500 bytes";
  RecordMeta m;
  const auto p = q.pending(b.meta.hash, &m);
  ASSERT_TRUE(p);
  EXPECT_EQ(*p, b.payload);
  EXPECT_EQ(m.tokens, b.meta.tokens);
  EXPECT_FALSE(q.contains(c.meta.hash));
  gate.unlock();
  ASSERT_TRUE(q.flush(5000));
  EXPECT_EQ(written, (std::vector<Digest>{a.meta.hash, b.meta.hash}));
  EXPECT_FALSE(q.contains(a.meta.hash));
}

// A purge drops what is queued for its namespace (and only that), so no write of it lands after the purge.
TEST(TierQueue, DropNamespaceRemovesOnlyThatNamespacesQueuedRecords) {
  std::mutex gate;
  gate.lock();  // the writer blocks on the first item until released
  std::vector<Digest> written;
  TierQueue q(1 << 20, [&](const TierWrite& w) {
    std::lock_guard g(gate);
    written.push_back(w.meta.hash);
  });
  const Sample a = sample(0), b = sample(1), c = sample(2);
  Sample b2 = sample(1);  // a second block of b's namespace
  b2.meta.tokens[1] = 9;
  b2.meta.hash = chain_hash(b2.meta.parent, b2.meta.tokens);
  for (const Sample* x : {&a, &b, &c, static_cast<const Sample*>(&b2)}) {
    ASSERT_TRUE(q.push({x->meta, std::make_shared<std::vector<uint8_t>>(x->payload), std::nullopt}));
  }
  EXPECT_EQ(q.drop_namespace(b.meta.ns), 2u);  // a is being written (another namespace): no wait
  EXPECT_FALSE(q.contains(b.meta.hash));
  EXPECT_FALSE(q.contains(b2.meta.hash));
  EXPECT_TRUE(q.contains(c.meta.hash));
  EXPECT_EQ(q.drop_namespace(b.meta.ns), 0u);
  gate.unlock();
  ASSERT_TRUE(q.flush(5000));
  EXPECT_EQ(written, (std::vector<Digest>{a.meta.hash, c.meta.hash}));
}

class DiskTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (test::temp_dir("disk-tier") / ::testing::UnitTest::GetInstance()->current_test_info()->name()).string();
    fs::remove_all(dir_);
  }
  DiskTierOptions options(uint64_t max_bytes = 1 << 20) const {
    DiskTierOptions o;
    o.dir = dir_;
    o.max_bytes = max_bytes;
    o.model = model_digest("fingerprint");
    return o;
  }
  std::string dir_;
};

TEST_F(DiskTierTest, WritesReadsAndFindsRecordsAfterARestart) {
  const Sample a = sample(0), b = sample(1);
  {
    DiskTier t(options());
    t.offer(a.meta, std::make_shared<std::vector<uint8_t>>(a.payload));
    t.offer(b.meta, std::make_shared<std::vector<uint8_t>>(b.payload));
    t.flush(5000);
    EXPECT_TRUE(fs::exists(t.path_of(a.meta.hash)));
    EXPECT_EQ(t.stats().n_written_records, 2);
  }
  DiskTier t(options());
  EXPECT_EQ(t.stats().n_records, 2);
  EXPECT_TRUE(t.contains(b.meta.hash));
  const auto got = t.fetch(std::span<const RecordMeta>(&b.meta, 1));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], b.payload);
  EXPECT_EQ(t.stats().n_hit_blocks, 1);
  // A lookup expecting other tokens under the same hash is refused and the record removed.
  RecordMeta wrong = a.meta;
  wrong.tokens[0] = 99;
  EXPECT_TRUE(t.fetch(std::span<const RecordMeta>(&wrong, 1)).empty());
  EXPECT_EQ(t.stats().n_rejected[static_cast<size_t>(RecordStatus::Mismatch)], 1);
  EXPECT_FALSE(t.contains(a.meta.hash));
}

TEST_F(DiskTierTest, KeepsTheMostRecentlyUsedWithinItsSize) {
  const size_t record = encode_record(sample().meta, sample().payload, Compression::None).size();
  DiskTier t(options(3 * record));
  std::vector<Sample> s;
  for (int i = 0; i < 3; ++i) s.push_back(sample(i));
  for (const Sample& x : s) t.offer(x.meta, std::make_shared<std::vector<uint8_t>>(x.payload));
  t.flush(5000);
  EXPECT_EQ(t.fetch(std::span<const RecordMeta>(&s[0].meta, 1)).size(), 1u);  // 0 becomes the most recent
  const Sample d = sample(3);
  t.offer(d.meta, std::make_shared<std::vector<uint8_t>>(d.payload));
  t.flush(5000);
  EXPECT_TRUE(t.contains(s[0].meta.hash));
  EXPECT_FALSE(t.contains(s[1].meta.hash)) << "the least recently used goes";
  EXPECT_FALSE(fs::exists(t.path_of(s[1].meta.hash)));
  EXPECT_TRUE(t.contains(s[2].meta.hash));
  EXPECT_TRUE(t.contains(d.meta.hash));
  EXPECT_EQ(t.stats().n_stored_bytes, static_cast<int64_t>(3 * record));
}

TEST_F(DiskTierTest, APurgeLeavesNoRecordOfItsNamespaceBehind) {
  DiskTier t(options());
  const Sample other = sample(7);
  std::vector<Sample> mine;
  for (int i = 0; i < 40; ++i) {  // one namespace, 40 blocks offered just before the purge: most still queued
    Sample x = sample(3);
    x.meta.tokens[1] = 100 + i;
    x.meta.hash = chain_hash(x.meta.parent, x.meta.tokens);
    mine.push_back(x);
  }
  t.offer(other.meta, std::make_shared<std::vector<uint8_t>>(other.payload));
  for (const Sample& x : mine) t.offer(x.meta, std::make_shared<std::vector<uint8_t>>(x.payload));
  t.purge_namespace(mine[0].meta.ns);
  t.flush(5000);
  for (const Sample& x : mine) {
    EXPECT_FALSE(t.contains(x.meta.hash));
    EXPECT_FALSE(fs::exists(t.path_of(x.meta.hash)));
  }
  EXPECT_TRUE(t.contains(other.meta.hash));
  EXPECT_EQ(t.stats().n_records, 1);
}

TEST_F(DiskTierTest, AChainStopsAtItsFirstGap) {
  DiskTier t(options());
  const Sample a = sample(0), c = sample(2);
  t.offer(a.meta, std::make_shared<std::vector<uint8_t>>(a.payload));
  t.offer(c.meta, std::make_shared<std::vector<uint8_t>>(c.payload));
  t.flush(5000);
  const std::vector<RecordMeta> chain = {a.meta, sample(1).meta, c.meta};
  EXPECT_EQ(t.fetch(chain).size(), 1u);
  EXPECT_EQ(t.stats().n_miss_blocks, 2);
}

// A FIFO planted where a record was (or at a record's name before a restart) once froze the lookup in open()
// inside the engine's step; it is now unreadable: a miss, the entry dropped, the tier still serving.
TEST_F(DiskTierTest, AFifoInPlaceOfARecordIsAMissNotAHang) {
  const Sample a = sample(0), b = sample(1);
  DiskTier t(options());
  t.offer(a.meta, std::make_shared<std::vector<uint8_t>>(a.payload));
  t.offer(b.meta, std::make_shared<std::vector<uint8_t>>(b.payload));
  t.flush(5000);
  const std::string path = t.path_of(a.meta.hash);
  ASSERT_TRUE(fs::remove(path));
  ASSERT_EQ(::mkfifo(path.c_str(), 0644), 0) << std::strerror(errno);
  EXPECT_TRUE(t.fetch(std::span<const RecordMeta>(&a.meta, 1)).empty());
  EXPECT_FALSE(t.contains(a.meta.hash));
  EXPECT_EQ(t.fetch(std::span<const RecordMeta>(&b.meta, 1)).size(), 1u);
  DiskTier restarted(options());  // the start-up scan skips it too
  EXPECT_FALSE(restarted.contains(a.meta.hash));
  EXPECT_TRUE(restarted.contains(b.meta.hash));
}

}  // namespace
}  // namespace preface::kv
