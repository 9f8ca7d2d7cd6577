// KV cache events in vLLM's wire shape (engine/kv_event_wire.h) and their ZeroMQ publisher
// (engine/kv_event_publisher.h): every field of the msgpack a consumer decodes in both layouts (the current one
// through a decoder written from vLLM's structs, vllm_kv_events.h), the int and bytes hash forms, the coalescing
// of a chain into one BlockStored, per-namespace extra_keys, the multipart [topic, seq, payload] messages a SUB
// socket reads, and replay of buffered batches from a sequence number.
#include <gtest/gtest.h>

#include <msgpack.hpp>
#include <zmq.hpp>

#include <chrono>
#include <optional>
#include <thread>

#include "engine/kv_event_publisher.h"
#include "engine/kv_event_wire.h"
#include "engine/vllm_kv_events.h"
#include "util/error.h"

namespace preface::test {
namespace {

using engine::KvEventHashFormat;
using engine::KvEventRecord;

kv::Digest digest_of(uint8_t seed) {
  kv::Digest d;
  for (size_t i = 0; i < d.bytes.size(); ++i) d.bytes[i] = static_cast<uint8_t>(seed * 31 + i * 7);
  return d;
}

// The int form computed independently: the digest as a big-endian integer, modulo 2^64.
uint64_t int_form(const kv::Digest& d) {
  uint64_t v = 0;
  for (const uint8_t b : d.bytes) v = (v << 8) | b;  // shifts the high bytes out
  return v;
}

KvEventRecord stored(const kv::Digest& hash, std::optional<kv::Digest> parent, int32_t first_token) {
  KvEventRecord r;
  r.kind = KvEventRecord::Kind::Stored;
  r.hash = hash;
  r.first_in_chain = !parent;
  if (parent) r.parent = *parent;
  for (int32_t i = 0; i < 4; ++i) r.tokens.push_back(first_token + i);
  return r;
}

KvEventRecord removed(const kv::Digest& hash) {
  KvEventRecord r;
  r.kind = KvEventRecord::Kind::Removed;
  r.hash = hash;
  return r;
}

KvEventRecord cleared() {
  KvEventRecord r;
  r.kind = KvEventRecord::Kind::Cleared;
  return r;
}

std::string str(const msgpack::object& o) {
  EXPECT_EQ(o.type, msgpack::type::STR);
  return o.type == msgpack::type::STR ? std::string(o.via.str.ptr, o.via.str.size) : "";
}

const msgpack::object_array& arr(const msgpack::object& o) {
  static const msgpack::object_array kEmpty{0, nullptr};
  EXPECT_EQ(o.type, msgpack::type::ARRAY);
  return o.type == msgpack::type::ARRAY ? o.via.array : kEmpty;
}

void expect_hash(const msgpack::object& o, const kv::Digest& d, KvEventHashFormat format) {
  if (format == KvEventHashFormat::Int) {
    ASSERT_EQ(o.type, msgpack::type::POSITIVE_INTEGER);
    EXPECT_EQ(o.via.u64, int_form(d));
  } else {
    ASSERT_EQ(o.type, msgpack::type::BIN);
    ASSERT_EQ(o.via.bin.size, 32u);
    EXPECT_EQ(std::memcmp(o.via.bin.ptr, d.bytes.data(), 32), 0);
  }
}

TEST(KvEventWire, IntHashIsTheDigestsLowEightBytesBigEndian) {
  kv::Digest d;
  for (size_t i = 0; i < 32; ++i) d.bytes[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(engine::kv_event_int_hash(d), 0x18191a1b1c1d1e1full);
  const kv::Digest e = digest_of(9);
  EXPECT_EQ(engine::kv_event_int_hash(e), int_form(e));
}

class KvEventWireFormats : public ::testing::TestWithParam<KvEventHashFormat> {};

TEST_P(KvEventWireFormats, EveryFieldDecodes) {
  const KvEventHashFormat format = GetParam();
  const kv::Digest a = digest_of(1), b = digest_of(2), c = digest_of(3), x = digest_of(4), y = digest_of(5);
  // A chain a <- b <- c (a first in its namespace), a block y continuing some older x, two removals, a clear.
  const std::vector<KvEventRecord> records = {stored(a, std::nullopt, 100), stored(b, a, 200), stored(c, b, 300),
                                              stored(y, x, 400), removed(b), removed(c),
                                              cleared()};
  engine::KvEventWireConfig config;
  config.layout = engine::KvEventLayout::VllmLegacy;
  config.hash_format = format;
  config.block_size = 4;
  const std::string bytes = engine::encode_kv_event_batch(1234.5, records, config);

  const msgpack::object_handle oh = msgpack::unpack(bytes.data(), bytes.size());
  const auto& batch = arr(oh.get());
  ASSERT_EQ(batch.size, 3u);
  ASSERT_EQ(batch.ptr[0].type, msgpack::type::FLOAT64);
  EXPECT_EQ(batch.ptr[0].via.f64, 1234.5);
  EXPECT_EQ(batch.ptr[2].via.u64, 0u);  // data_parallel_rank
  const auto& events = arr(batch.ptr[1]);
  ASSERT_EQ(events.size, 4u);

  const auto& chain = arr(events.ptr[0]);
  ASSERT_EQ(chain.size, 8u);
  EXPECT_EQ(str(chain.ptr[0]), "BlockStored");
  ASSERT_EQ(arr(chain.ptr[1]).size, 3u);
  expect_hash(arr(chain.ptr[1]).ptr[0], a, format);
  expect_hash(arr(chain.ptr[1]).ptr[1], b, format);
  expect_hash(arr(chain.ptr[1]).ptr[2], c, format);
  EXPECT_TRUE(chain.ptr[2].is_nil());  // the first block's parent is the namespace root
  const auto& tokens = arr(chain.ptr[3]);
  ASSERT_EQ(tokens.size, 12u);
  for (uint32_t i = 0; i < 12; ++i) EXPECT_EQ(tokens.ptr[i].via.i64, 100 * (1 + i / 4) + i % 4) << i;
  EXPECT_EQ(chain.ptr[4].via.u64, 4u);  // block_size
  EXPECT_TRUE(chain.ptr[5].is_nil());   // lora_id
  EXPECT_EQ(str(chain.ptr[6]), "GPU");  // medium
  EXPECT_TRUE(chain.ptr[7].is_nil());   // lora_name

  const auto& single = arr(events.ptr[1]);
  ASSERT_EQ(single.size, 8u);
  EXPECT_EQ(str(single.ptr[0]), "BlockStored");
  ASSERT_EQ(arr(single.ptr[1]).size, 1u);
  expect_hash(arr(single.ptr[1]).ptr[0], y, format);
  expect_hash(single.ptr[2], x, format);
  EXPECT_EQ(arr(single.ptr[3]).size, 4u);
  EXPECT_EQ(arr(single.ptr[3]).ptr[0].via.i64, 400);

  const auto& gone = arr(events.ptr[2]);
  ASSERT_EQ(gone.size, 3u);
  EXPECT_EQ(str(gone.ptr[0]), "BlockRemoved");
  ASSERT_EQ(arr(gone.ptr[1]).size, 2u);
  expect_hash(arr(gone.ptr[1]).ptr[0], b, format);
  expect_hash(arr(gone.ptr[1]).ptr[1], c, format);
  EXPECT_EQ(str(gone.ptr[2]), "GPU");

  const auto& cleared = arr(events.ptr[3]);
  ASSERT_EQ(cleared.size, 1u);
  EXPECT_EQ(str(cleared.ptr[0]), "AllBlocksCleared");
}


TEST(KvEventWire, EmptyBatchHasNoEvents) {
  engine::KvEventWireConfig legacy;
  legacy.layout = engine::KvEventLayout::VllmLegacy;
  const std::string bytes = engine::encode_kv_event_batch(1.0, {}, legacy);
  const msgpack::object_handle oh = msgpack::unpack(bytes.data(), bytes.size());
  ASSERT_EQ(arr(oh.get()).size, 3u);
  EXPECT_EQ(arr(arr(oh.get()).ptr[1]).size, 0u);
  const VllmKvBatch b = decode_vllm_kv_batch(engine::encode_kv_event_batch(1.0, {}, {}));
  EXPECT_EQ(b.error, "");
  EXPECT_TRUE(b.events.empty());
}

std::string hash_key(const kv::Digest& d, KvEventHashFormat format) {
  if (format == KvEventHashFormat::Bytes) return std::string(d.bytes.begin(), d.bytes.end());
  return std::string(d.bytes.end() - 8, d.bytes.end());  // the int form's 8 bytes, big-endian
}

TEST_P(KvEventWireFormats, CurrentLayoutDecodesWithVllmsStructs) {
  const KvEventHashFormat format = GetParam();
  const kv::Digest a = digest_of(1), b = digest_of(2), x = digest_of(4), y = digest_of(5);
  const kv::Digest tenant_a = digest_of(20), tenant_b = digest_of(21);
  std::vector<KvEventRecord> records = {stored(a, std::nullopt, 100), stored(b, a, 200), stored(y, x, 400),
                                        removed(b), cleared()};
  records[0].root = records[1].root = tenant_a;
  records[2].root = tenant_b;
  records[3].medium = "CPU";  // a record's own medium wins over the configured one
  engine::KvEventWireConfig config;
  config.hash_format = format;
  config.block_size = 4;
  const std::string bytes = engine::encode_kv_event_batch(99.25, records, config);
  const VllmKvBatch batch = decode_vllm_kv_batch(bytes);
  ASSERT_EQ(batch.error, "");
  EXPECT_EQ(batch.ts, 99.25);
  EXPECT_EQ(batch.data_parallel_rank, 0);
  ASSERT_EQ(batch.events.size(), 4u);

  const VllmKvEvent& chain = batch.events[0];
  EXPECT_EQ(chain.type, "BlockStored");
  EXPECT_EQ(chain.hashes, (std::vector<std::string>{hash_key(a, format), hash_key(b, format)}));
  EXPECT_FALSE(chain.parent);
  EXPECT_EQ(chain.tokens, (std::vector<int64_t>{100, 101, 102, 103, 200, 201, 202, 203}));
  EXPECT_EQ(chain.block_size, 4);
  EXPECT_EQ(chain.medium, "GPU");
  const std::vector<std::string> key_a = {engine::kv_event_namespace_key(tenant_a)};
  EXPECT_EQ(chain.extra_keys, (std::vector<std::vector<std::string>>{key_a, key_a}));
  EXPECT_EQ(key_a[0], "ns:6c737a81888f969da4abb2b9c0c7ced5");  // digest_of(20)'s first 16 bytes

  const VllmKvEvent& other = batch.events[1];
  EXPECT_EQ(other.parent, hash_key(x, format));
  ASSERT_EQ(other.extra_keys.size(), 1u);
  EXPECT_NE(other.extra_keys[0], key_a) << "two namespaces' blocks carry the same extra key";

  EXPECT_EQ(batch.events[2].type, "BlockRemoved");
  EXPECT_EQ(batch.events[2].hashes, (std::vector<std::string>{hash_key(b, format)}));
  EXPECT_EQ(batch.events[2].medium, "CPU");
  EXPECT_EQ(batch.events[3].type, "AllBlocksCleared");

  // Each layout is what its consumers expect and nothing else: the current decoder refuses the legacy arrays (as
  // vLLM's does: "Expected `object`, got `array`"), the legacy one the maps.
  engine::KvEventWireConfig legacy = config;
  legacy.layout = engine::KvEventLayout::VllmLegacy;
  EXPECT_NE(decode_vllm_kv_batch(engine::encode_kv_event_batch(1.0, records, legacy)).error, "");
  EXPECT_NE(decode_vllm_kv_batch(bytes, /*legacy=*/true).error, "");
  EXPECT_EQ(decode_vllm_kv_batch(engine::encode_kv_event_batch(1.0, records, legacy), true).error, "");
}

INSTANTIATE_TEST_SUITE_P(Formats, KvEventWireFormats,
                         ::testing::Values(KvEventHashFormat::Int, KvEventHashFormat::Bytes));

kv::BlockEvent block_event(kv::BlockEventKind kind, const kv::Digest& hash, const kv::Digest& parent,
                           const kv::Digest& root, std::span<const int32_t> tokens) {
  return kv::BlockEvent{kind, 0, hash, parent, root, tokens};
}

// The three frames of one message, or nullopt after `timeout`.
std::optional<std::vector<std::string>> receive(zmq::socket_t& sub, std::chrono::milliseconds timeout) {
  zmq::pollitem_t item{sub.handle(), 0, ZMQ_POLLIN, 0};
  if (zmq::poll(&item, 1, timeout) <= 0) return std::nullopt;
  std::vector<std::string> frames;
  do {
    zmq::message_t m;
    if (!sub.recv(m)) return std::nullopt;
    frames.push_back(m.to_string());
  } while (sub.get(zmq::sockopt::rcvmore));
  return frames;
}

TEST(KvEventPublisher, SubscriberReadsTopicSequenceAndBatches) {
  engine::KvEventPublisherConfig config;
  config.endpoint = "tcp://127.0.0.1:*";
  config.topic = "kv@test";
  config.wire.block_size = 2;
  engine::KvEventPublisher pub(config);
  ASSERT_EQ(pub.endpoint().rfind("tcp://127.0.0.1:", 0), 0u) << pub.endpoint();

  zmq::context_t ctx(1);
  zmq::socket_t sub(ctx, zmq::socket_type::sub);
  sub.set(zmq::sockopt::subscribe, "kv@");
  sub.connect(pub.endpoint());
  const kv::Digest root = digest_of(10), h1 = digest_of(11), h2 = digest_of(12);
  const std::vector<int32_t> t1 = {7, 8}, t2 = {9, 10};
  // A PUB socket drops what it sends before the subscription arrives: clear until one message comes through.
  std::optional<std::vector<std::string>> first;
  for (int i = 0; i < 100 && !first; ++i) {
    pub.all_blocks_cleared();
    first = receive(sub, std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(first) << "no message reached the subscriber";
  while (receive(sub, std::chrono::milliseconds(100))) {
  }
  pub.on_block_event(block_event(kv::BlockEventKind::Registered, h1, root, root, t1));
  pub.on_block_event(block_event(kv::BlockEventKind::Registered, h2, h1, root, t2));
  pub.on_block_event(block_event(kv::BlockEventKind::Evicted, h2, h1, root, t2));

  std::vector<int32_t> seen_tokens;
  std::vector<std::string> tags;
  uint64_t last_seq = 0;
  const auto seq_of = [](const std::string& f) {
    uint64_t v = 0;
    for (const char c : f) v = (v << 8) | static_cast<uint8_t>(c);
    return v;
  };
  ASSERT_EQ(first->size(), 3u);
  EXPECT_EQ((*first)[0], "kv@test");
  ASSERT_EQ((*first)[1].size(), 8u);
  last_seq = seq_of((*first)[1]);
  while (tags.size() < 2 || tags.back() != "BlockRemoved") {
    const auto msg = receive(sub, std::chrono::seconds(5));
    ASSERT_TRUE(msg) << "events missing; got " << tags.size();
    ASSERT_EQ(msg->size(), 3u);
    EXPECT_EQ(seq_of((*msg)[1]), ++last_seq);  // consecutive batch numbers
    const VllmKvBatch batch = decode_vllm_kv_batch((*msg)[2]);
    ASSERT_EQ(batch.error, "");
    for (const VllmKvEvent& ev : batch.events) {
      tags.push_back(ev.type);
      if (ev.type == "BlockStored") {
        if (seen_tokens.empty()) {
          EXPECT_FALSE(ev.parent);
        }
        for (size_t k = 0; k < ev.hashes.size(); ++k) {
          EXPECT_EQ(ev.hashes[k], hash_key(seen_tokens.empty() && k == 0 ? h1 : h2, KvEventHashFormat::Int));
          EXPECT_EQ(ev.extra_keys[k], std::vector<std::string>{engine::kv_event_namespace_key(root)});
        }
        for (const int64_t t : ev.tokens) seen_tokens.push_back(static_cast<int32_t>(t));
      } else if (ev.type == "BlockRemoved") {
        EXPECT_EQ(ev.hashes.at(0), hash_key(h2, KvEventHashFormat::Int));
      }
    }
  }
  EXPECT_EQ(seen_tokens, (std::vector<int32_t>{7, 8, 9, 10}));
  const auto stats = pub.stats();
  EXPECT_EQ(stats.n_dropped, 0u);
  EXPECT_EQ(stats.n_send_failures, 0u);
  EXPECT_GE(stats.n_records, 3u);
}

// The replay client's side of vLLM's protocol: a DEALER sends [empty, start seq]; it gets [empty, seq, payload]
// per buffered batch from start on, then [empty, -1, empty].
std::vector<std::pair<int64_t, std::string>> replay_from(zmq::context_t& ctx, const std::string& endpoint,
                                                         uint64_t start) {
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.connect(endpoint);
  std::string start_bytes(8, '\0');
  for (int i = 0; i < 8; ++i) start_bytes[static_cast<size_t>(i)] = static_cast<char>((start >> (56 - 8 * i)) & 0xff);
  dealer.send(zmq::str_buffer(""), zmq::send_flags::sndmore);
  dealer.send(zmq::buffer(start_bytes), zmq::send_flags::none);
  std::vector<std::pair<int64_t, std::string>> out;
  for (;;) {
    const auto frames = receive(dealer, std::chrono::seconds(5));
    if (!frames || frames->size() != 3 || !(*frames)[0].empty() || (*frames)[1].size() != 8) {
      ADD_FAILURE() << "malformed or missing replay answer";
      return out;
    }
    int64_t seq = 0;
    for (const char c : (*frames)[1]) seq = static_cast<int64_t>((static_cast<uint64_t>(seq) << 8) | static_cast<uint8_t>(c));
    if (seq == -1) {
      EXPECT_TRUE((*frames)[2].empty());
      return out;
    }
    out.emplace_back(seq, (*frames)[2]);
  }
}

TEST(KvEventPublisher, ReplayReturnsTheBufferedBatchesFromASequenceNumber) {
  engine::KvEventPublisherConfig config;
  config.endpoint = "inproc://kv-events-replay-test";
  config.replay_endpoint = "tcp://127.0.0.1:*";
  config.replay_buffer_batches = 3;
  engine::KvEventPublisher pub(config);
  ASSERT_EQ(pub.replay_endpoint().rfind("tcp://127.0.0.1:", 0), 0u) << pub.replay_endpoint();
  const kv::Digest root = digest_of(30);
  const std::vector<int32_t> tokens = {1, 2, 3, 4};
  for (uint8_t i = 0; i < 5; ++i) {  // five batches, one block each (each waits for the previous one to be sent)
    const uint64_t before = pub.stats().n_batches;
    pub.on_block_event(block_event(kv::BlockEventKind::Registered, digest_of(40 + i), root, root, tokens));
    for (int k = 0; k < 500 && pub.stats().n_batches == before; ++k) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ASSERT_EQ(pub.stats().n_batches, before + 1);
  }
  zmq::context_t ctx(1);
  const auto replayed = replay_from(ctx, pub.replay_endpoint(), 3);
  ASSERT_EQ(replayed.size(), 2u);  // batches 3 and 4
  for (size_t i = 0; i < replayed.size(); ++i) {
    EXPECT_EQ(replayed[i].first, static_cast<int64_t>(3 + i));
    const VllmKvBatch b = decode_vllm_kv_batch(replayed[i].second);
    ASSERT_EQ(b.error, "");
    ASSERT_EQ(b.events.size(), 1u);
    EXPECT_EQ(b.events[0].hashes.at(0), hash_key(digest_of(static_cast<uint8_t>(43 + i)), KvEventHashFormat::Int));
  }
  // The buffer holds the last 3 batches: a request from 0 gets 2, 3, 4.
  const auto all = replay_from(ctx, pub.replay_endpoint(), 0);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all.front().first, 2);
  EXPECT_TRUE(replay_from(ctx, pub.replay_endpoint(), 9).empty());
  // The count follows the last answer's sending (the client may read the answer first).
  for (int k = 0; k < 500 && pub.stats().n_replays < 3; ++k) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_EQ(pub.stats().n_replays, 3u);
  // A malformed request (a 4-byte sequence number) is ignored and counted; the socket keeps answering.
  zmq::socket_t bad(ctx, zmq::socket_type::dealer);
  bad.set(zmq::sockopt::linger, 0);
  bad.connect(pub.replay_endpoint());
  bad.send(zmq::str_buffer(""), zmq::send_flags::sndmore);
  bad.send(zmq::str_buffer("1234"), zmq::send_flags::none);
  for (int k = 0; k < 500 && pub.stats().n_bad_replays == 0; ++k) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_EQ(pub.stats().n_bad_replays, 1u);
  EXPECT_EQ(replay_from(ctx, pub.replay_endpoint(), 4).size(), 1u);
}

TEST(KvEventPublisher, FullQueueDropsAndCounts) {
  engine::KvEventPublisherConfig config;
  config.endpoint = "inproc://kv-events-drop-test";
  config.max_queued_records = 0;  // every record finds the queue full
  engine::KvEventPublisher pub(config);
  for (int i = 0; i < 5; ++i) pub.all_blocks_cleared();
  const auto stats = pub.stats();
  EXPECT_EQ(stats.n_dropped, 5u);
  EXPECT_EQ(stats.n_records, 0u);
}

TEST(KvEventPublisher, RefusedEndpointThrows) {
  engine::KvEventPublisherConfig config;
  config.endpoint = "tcp://*:notaport";
  EXPECT_THROW(engine::KvEventPublisher{config}, Error);
  config.endpoint = "";
  EXPECT_THROW(engine::KvEventPublisher{config}, Error);
}

}  // namespace
}  // namespace preface::test
