// KV cache events of a real `preface serve --kv-events-endpoint` read by a ZeroMQ SUB socket, decoded as a
// consumer built from vLLM's current structs decodes them (engine/vllm_kv_events.h): a prompt's full blocks arrive
// as BlockStored chains whose hashes link parent to child and whose token ids are the prompt's, a repeated prompt
// stores nothing new, and a purge (DELETE /v1/cache) removes exactly the stored hashes and ends with
// AllBlocksCleared. Two tenants' identical prompts are different blocks with different extra_keys, and the replay
// socket hands a late consumer everything from the start-up AllBlocksCleared (seq 0) on.
#include <gtest/gtest.h>
#include <httplib.h>

#include <msgpack.hpp>
#include <zmq.hpp>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <thread>

#include "cli_harness.h"
#include "engine/vllm_kv_events.h"

namespace preface::test {
namespace {

using nlohmann::json;
constexpr int kBlock = 16;
constexpr int kPromptTokens = 12 * kBlock + 5;

std::vector<int> prompt_of(int variant) {
  std::vector<int> p;
  for (int i = 0; i < kPromptTokens; ++i) p.push_back(3 + (i * 7 + variant * 31 + i * i * variant) % 480);
  return p;
}

int complete(const std::string& url, const std::vector<int>& prompt, const std::string& key = "") {
  httplib::Client c(url);
  c.set_read_timeout(60, 0);
  const json body = {{"prompt", prompt}, {"max_tokens", 4}, {"temperature", 0}};
  httplib::Headers h;
  if (!key.empty()) h.emplace("Authorization", "Bearer " + key);
  const auto res = c.Post("/v1/completions", h, body.dump(), "application/json");
  return res ? res->status : -1;
}

// One decoded event: its tag and, for BlockStored / BlockRemoved, its fields (int hashes).
struct Event {
  std::string tag;
  std::vector<uint64_t> hashes;
  std::optional<uint64_t> parent;  // BlockStored: nil for a chain's first block
  std::vector<int> tokens;
  int block_size = 0;
  std::string medium;
  std::vector<std::string> namespaces;  // BlockStored: each block's extra key
};

uint64_t int_hash(const std::string& bytes) {
  EXPECT_EQ(bytes.size(), 8u) << "not an int hash";
  uint64_t v = 0;
  for (const char c : bytes) v = (v << 8) | static_cast<uint8_t>(c);
  return v;
}

std::vector<Event> decode(const std::string& payload) {
  const VllmKvBatch batch = decode_vllm_kv_batch(payload);
  EXPECT_EQ(batch.error, "") << "vLLM's structs do not decode the payload";
  std::vector<Event> out;
  for (const VllmKvEvent& v : batch.events) {
    Event e;
    e.tag = v.type;
    for (const std::string& h : v.hashes) e.hashes.push_back(int_hash(h));
    if (v.parent) e.parent = int_hash(*v.parent);
    e.tokens.assign(v.tokens.begin(), v.tokens.end());
    e.block_size = static_cast<int>(v.block_size);
    e.medium = v.medium;
    for (const auto& keys : v.extra_keys) e.namespaces.push_back(keys.empty() ? "" : keys.front());
    out.push_back(std::move(e));
  }
  return out;
}

class Subscriber {
 public:
  explicit Subscriber(const std::string& endpoint) : sub_(ctx_, zmq::socket_type::sub) {
    sub_.set(zmq::sockopt::subscribe, "");
    sub_.connect(endpoint);
  }
  // The events of the messages that arrive within `timeout` of each other, in order (seq checked consecutive).
  std::vector<Event> drain(std::chrono::milliseconds timeout) {
    std::vector<Event> out;
    zmq::pollitem_t item{sub_.handle(), 0, ZMQ_POLLIN, 0};
    while (zmq::poll(&item, 1, timeout) > 0) {
      std::vector<std::string> frames;
      do {
        zmq::message_t m;
        if (!sub_.recv(m)) return out;
        frames.push_back(m.to_string());
      } while (sub_.get(zmq::sockopt::rcvmore));
      EXPECT_EQ(frames.size(), 3u);
      if (frames.size() != 3) continue;
      uint64_t seq = 0;
      for (const char c : frames[1]) seq = (seq << 8) | static_cast<uint8_t>(c);
      if (last_seq_) {
        EXPECT_EQ(seq, *last_seq_ + 1) << "a message was lost";
      }
      last_seq_ = seq;
      for (Event& e : decode(frames[2])) out.push_back(std::move(e));
    }
    return out;
  }

 private:
  zmq::context_t ctx_{1};
  zmq::socket_t sub_;
  std::optional<uint64_t> last_seq_;
};

TEST(ServeKvEvents, StoredChainsAndPurgeReachASubscriber) {
  const std::string model = shared_file("models/stories260K.gguf").string();
  if (model.empty()) GTEST_SKIP() << "stories260K.gguf not available";
  ServeProcess srv({"-m", model, "--threads", "1", "--kv-cache-mem", "8MiB", "--quiet", "--admin-key", "adm",
                    "--kv-events-endpoint", "tcp://127.0.0.1:*", "--kv-events-topic", "preface"},
                   "kv-events");
  ASSERT_FALSE(srv.url().empty()) << srv.log();
  std::smatch m;
  const std::string log = srv.log();
  ASSERT_TRUE(std::regex_search(log, m, std::regex(R"(KV events on (tcp://127\.0\.0\.1:[0-9]+))"))) << log;
  Subscriber sub(m[1].str());

  // A PUB socket drops messages sent before a subscription arrives: send fresh prompts until events come through.
  std::map<uint64_t, Event> stored;  // hash -> the BlockStored record of that one block
  int variant = 100;
  std::vector<Event> warm;
  for (int i = 0; i < 50 && warm.empty(); ++i) {
    ASSERT_EQ(complete(srv.url(), prompt_of(++variant)), 200);
    warm = sub.drain(std::chrono::milliseconds(300));
  }
  ASSERT_FALSE(warm.empty()) << "no KV event reached the subscriber";
  std::set<uint64_t> live;
  const auto track = [&](const std::vector<Event>& evs) {
    for (const Event& e : evs) {
      if (e.tag == "BlockStored") live.insert(e.hashes.begin(), e.hashes.end());
      if (e.tag == "BlockRemoved") {
        for (uint64_t h : e.hashes) live.erase(h);
      }
    }
  };
  track(warm);

  // A new prompt: its 12 full blocks as BlockStored, chained, with the prompt's tokens.
  const std::vector<int> prompt = prompt_of(1);
  ASSERT_EQ(complete(srv.url(), prompt), 200);
  const std::vector<Event> evs = sub.drain(std::chrono::milliseconds(500));
  track(evs);
  std::vector<uint64_t> chain;
  std::vector<int> tokens;
  for (const Event& e : evs) {
    ASSERT_EQ(e.tag, "BlockStored");
    EXPECT_EQ(e.block_size, kBlock);
    EXPECT_EQ(e.medium, "GPU");
    if (chain.empty()) {
      EXPECT_FALSE(e.parent) << "the first block's parent is the namespace root: nil";
    } else {
      EXPECT_EQ(e.parent, chain.back()) << "each BlockStored continues the chain";
    }
    ASSERT_EQ(e.tokens.size(), e.hashes.size() * kBlock);
    chain.insert(chain.end(), e.hashes.begin(), e.hashes.end());
    tokens.insert(tokens.end(), e.tokens.begin(), e.tokens.end());
  }
  ASSERT_EQ(chain.size(), 12u);
  EXPECT_EQ(std::set<uint64_t>(chain.begin(), chain.end()).size(), 12u);
  EXPECT_EQ(tokens, std::vector<int>(prompt.begin(), prompt.begin() + 12 * kBlock));

  // The same prompt again hits: nothing new is stored.
  ASSERT_EQ(complete(srv.url(), prompt), 200);
  EXPECT_TRUE(sub.drain(std::chrono::milliseconds(300)).empty());

  // A purge of the (only) tenant removes every stored block, then announces the empty cache.
  httplib::Client c(srv.url());
  httplib::Headers h = {{"Authorization", "Bearer adm"}};
  const auto res = c.Delete("/v1/cache", h, json{{"tenant", ""}}.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const int purged = json::parse(res->body)["purged_blocks"].get<int>();
  const std::vector<Event> gone = sub.drain(std::chrono::milliseconds(500));
  ASSERT_FALSE(gone.empty());
  std::set<uint64_t> removed;
  for (size_t i = 0; i + 1 < gone.size(); ++i) {
    ASSERT_EQ(gone[i].tag, "BlockRemoved");
    EXPECT_EQ(gone[i].medium, "GPU");
    removed.insert(gone[i].hashes.begin(), gone[i].hashes.end());
  }
  EXPECT_EQ(gone.back().tag, "AllBlocksCleared");
  EXPECT_EQ(static_cast<int>(removed.size()), purged);
  for (uint64_t hash : chain) EXPECT_TRUE(removed.contains(hash));
  track(gone);
  EXPECT_TRUE(live.empty()) << live.size() << " stored blocks were never removed";
}

// Every batch the replay socket at `endpoint` holds from seq 0 on, in order (vLLM's replay protocol).
std::vector<std::pair<int64_t, std::string>> replay_all(const std::string& endpoint) {
  zmq::context_t ctx(1);
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.set(zmq::sockopt::rcvtimeo, 5000);
  dealer.connect(endpoint);
  dealer.send(zmq::str_buffer(""), zmq::send_flags::sndmore);
  dealer.send(zmq::buffer(std::string(8, '\0')), zmq::send_flags::none);
  std::vector<std::pair<int64_t, std::string>> out;
  for (;;) {
    std::vector<std::string> frames;
    do {
      zmq::message_t m;
      if (!dealer.recv(m)) {
        ADD_FAILURE() << "the replay socket did not answer";
        return out;
      }
      frames.push_back(m.to_string());
    } while (dealer.get(zmq::sockopt::rcvmore));
    if (frames.size() != 3 || frames[1].size() != 8) {
      ADD_FAILURE() << "malformed replay frames";
      return out;
    }
    const auto seq = static_cast<int64_t>(int_hash(frames[1]));
    if (seq == -1) return out;
    out.emplace_back(seq, frames[2]);
  }
}

TEST(ServeKvEvents, TenantsIdenticalPromptsDifferInExtraKeysAndReplayReachesStartUp) {
  const std::string model = shared_file("models/stories260K.gguf").string();
  if (model.empty()) GTEST_SKIP() << "stories260K.gguf not available";
  const auto keys = temp_dir("kv-events-tenants") / "keys.txt";
  {
    std::ofstream(keys) << "key-alice alice\nkey-bob bob\n";
  }
  ServeProcess srv({"-m", model, "--threads", "1", "--kv-cache-mem", "8MiB", "--quiet", "--api-keys", keys.string(),
                    "--kv-events-endpoint", "tcp://127.0.0.1:*", "--kv-events-replay-endpoint", "tcp://127.0.0.1:*"},
                   "kv-events-tenants");
  ASSERT_FALSE(srv.url().empty()) << srv.log();
  std::smatch m;
  const std::string log = srv.log();
  ASSERT_TRUE(std::regex_search(log, m, std::regex(R"(replay on (tcp://127\.0\.0\.1:[0-9]+))"))) << log;
  const std::string replay = m[1].str();
  const std::vector<int> prompt = prompt_of(3);
  ASSERT_EQ(complete(srv.url(), prompt, "key-alice"), 200);
  ASSERT_EQ(complete(srv.url(), prompt, "key-bob"), 200);

  // No subscriber was connected: everything comes from the replay buffer, starting at seq 0.
  std::vector<std::pair<int64_t, std::string>> batches;
  std::map<std::string, std::vector<Event>> by_namespace;
  for (int attempt = 0; attempt < 100; ++attempt) {
    batches = replay_all(replay);
    by_namespace.clear();
    for (const auto& [seq, payload] : batches) {
      for (Event& e : decode(payload)) {
        if (e.tag == "BlockStored") by_namespace[e.namespaces.at(0)].push_back(e);
      }
    }
    size_t n_blocks = 0;
    for (const auto& [ns, evs] : by_namespace) {
      for (const Event& e : evs) n_blocks += e.hashes.size();
    }
    if (n_blocks >= 24) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_FALSE(batches.empty());
  EXPECT_EQ(batches.front().first, 0);
  const std::vector<Event> first = decode(batches.front().second);
  ASSERT_FALSE(first.empty());
  EXPECT_EQ(first.front().tag, "AllBlocksCleared") << "seq 0 is the start-up reset";
  for (size_t i = 1; i < batches.size(); ++i) EXPECT_EQ(batches[i].first, batches[i - 1].first + 1);

  ASSERT_EQ(by_namespace.size(), 2u) << "two tenants, two namespaces";
  std::vector<std::set<uint64_t>> hashes;
  std::vector<std::vector<int>> tokens;
  for (const auto& [ns, evs] : by_namespace) {
    EXPECT_EQ(ns.rfind("ns:", 0), 0u) << ns;
    EXPECT_EQ(ns.find("alice"), std::string::npos);
    EXPECT_EQ(ns.find("key-"), std::string::npos);
    hashes.emplace_back();
    tokens.emplace_back();
    for (const Event& e : evs) {
      for (const std::string& k : e.namespaces) EXPECT_EQ(k, ns) << "one chain, one namespace";
      hashes.back().insert(e.hashes.begin(), e.hashes.end());
      tokens.back().insert(tokens.back().end(), e.tokens.begin(), e.tokens.end());
    }
  }
  EXPECT_EQ(hashes[0].size(), 12u);
  EXPECT_EQ(hashes[1].size(), 12u);
  EXPECT_EQ(tokens[0], tokens[1]) << "the same prompt";
  for (uint64_t h : hashes[0]) EXPECT_FALSE(hashes[1].contains(h)) << "a block shared between tenants";
}

TEST(ServeKvEvents, TheDiskTierAnnouncesItsBlocksAsCpuMedium) {
  const std::string model = shared_file("models/stories260K.gguf").string();
  if (model.empty()) GTEST_SKIP() << "stories260K.gguf not available";
  const auto dir = temp_dir("kv-events-disk");
  ServeProcess srv({"-m", model, "--threads", "1", "--kv-cache-mem", "8MiB", "--quiet", "--admin-key", "adm",
                    "--cache-dir", dir.string(), "--cache-disk-size", "64MiB", "--cache-write-through",
                    "--kv-events-endpoint", "tcp://127.0.0.1:*", "--kv-events-replay-endpoint", "tcp://127.0.0.1:*"},
                   "kv-events-disk");
  ASSERT_FALSE(srv.url().empty()) << srv.log();
  std::smatch m;
  const std::string log = srv.log();
  ASSERT_TRUE(std::regex_search(log, m, std::regex(R"(replay on (tcp://127\.0\.0\.1:[0-9]+))"))) << log;
  const std::string replay = m[1].str();
  ASSERT_EQ(complete(srv.url(), prompt_of(4)), 200);
  // Every event so far, by medium: what was stored, and what was removed.
  const auto by_medium = [&](const char* tag) {
    std::map<std::string, std::set<uint64_t>> out;
    for (const auto& [seq, payload] : replay_all(replay)) {
      for (const Event& e : decode(payload)) {
        if (e.tag == tag) out[e.medium].insert(e.hashes.begin(), e.hashes.end());
      }
    }
    return out;
  };
  std::map<std::string, std::set<uint64_t>> stored;
  for (int i = 0; i < 200 && (stored = by_medium("BlockStored"))["CPU"].size() < 12; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(stored["GPU"].size(), 12u);
  EXPECT_EQ(stored["CPU"], stored["GPU"]) << "the disk tier holds the same blocks, announced as CPU";

  httplib::Client c(srv.url());
  const auto res = c.Delete("/v1/cache", {{"Authorization", "Bearer adm"}}, json{{"tenant", ""}}.dump(),
                            "application/json");
  ASSERT_TRUE(res && res->status == 200);
  std::map<std::string, std::set<uint64_t>> removed;
  for (int i = 0; i < 200 && (removed = by_medium("BlockRemoved"))["CPU"].size() < 12; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(removed["CPU"], stored["CPU"]) << "the purge removed the disk tier's records";
  EXPECT_EQ(removed["GPU"], stored["GPU"]);
}

TEST(ServeKvEvents, RefusedEndpointFailsAtStart) {
  const std::string model = shared_file("models/stories260K.gguf").string();
  if (model.empty()) GTEST_SKIP() << "stories260K.gguf not available";
  const CliResult r = run_preface({"serve", "-m", model, "--port", "0", "--kv-events-endpoint", "tcp://*:notaport"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.all().find("KV events: cannot open tcp://*:notaport"), std::string::npos) << r.all();
}

}  // namespace
}  // namespace preface::test
