// KV cache events of a real `preface serve --kv-events-endpoint` read by a ZeroMQ SUB socket, decoded as a
// vLLM consumer decodes them (engine/kv_event_wire.h): a prompt's full blocks arrive as BlockStored chains whose
// hashes link parent to child and whose token ids are the prompt's, a repeated prompt stores nothing new, and a
// purge (DELETE /v1/cache) removes exactly the stored hashes and ends with AllBlocksCleared.
#include <gtest/gtest.h>
#include <httplib.h>

#include <msgpack.hpp>
#include <zmq.hpp>

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>

#include "cli_harness.h"

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

int complete(const std::string& url, const std::vector<int>& prompt) {
  httplib::Client c(url);
  c.set_read_timeout(60, 0);
  const json body = {{"prompt", prompt}, {"max_tokens", 4}, {"temperature", 0}};
  const auto res = c.Post("/v1/completions", body.dump(), "application/json");
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
};

std::vector<Event> decode(const std::string& payload) {
  const msgpack::object_handle oh = msgpack::unpack(payload.data(), payload.size());
  const msgpack::object& batch = oh.get();
  EXPECT_EQ(batch.type, msgpack::type::ARRAY);
  EXPECT_EQ(batch.via.array.size, 3u);
  std::vector<Event> out;
  const msgpack::object& events = batch.via.array.ptr[1];
  for (uint32_t i = 0; i < events.via.array.size; ++i) {
    const msgpack::object_array& ev = events.via.array.ptr[i].via.array;
    Event e;
    e.tag = ev.ptr[0].as<std::string>();
    if (e.tag != "AllBlocksCleared") {
      for (uint32_t k = 0; k < ev.ptr[1].via.array.size; ++k) e.hashes.push_back(ev.ptr[1].via.array.ptr[k].via.u64);
    }
    if (e.tag == "BlockStored") {
      EXPECT_EQ(ev.size, 8u);
      if (!ev.ptr[2].is_nil()) e.parent = ev.ptr[2].via.u64;
      e.tokens = ev.ptr[3].as<std::vector<int>>();
      e.block_size = ev.ptr[4].as<int>();
      e.medium = ev.ptr[6].as<std::string>();
    } else if (e.tag == "BlockRemoved") {
      e.medium = ev.ptr[2].as<std::string>();
    }
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

TEST(ServeKvEvents, RefusedEndpointFailsAtStart) {
  const std::string model = shared_file("models/stories260K.gguf").string();
  if (model.empty()) GTEST_SKIP() << "stories260K.gguf not available";
  const CliResult r = run_preface({"serve", "-m", model, "--port", "0", "--kv-events-endpoint", "tcp://*:notaport"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.all().find("KV events: cannot open tcp://*:notaport"), std::string::npos) << r.all();
}

}  // namespace
}  // namespace preface::test
