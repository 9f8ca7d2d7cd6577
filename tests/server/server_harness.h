// End-to-end test helpers: a real preface server (own model instance, engine and HTTP server on a free loopback
// port) and small HTTP/SSE client helpers built on httplib::Client.
#pragma once
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "model/model.h"
#include "server/http/server.h"
#include "support/shared_data.h"
#include "tokenizer/tokenizer.h"

namespace preface::test {

using nlohmann::json;

struct TestServerConfig {
  engine::EngineConfig engine = [] {
    engine::EngineConfig c;
    c.kv_cache_bytes = 16ull << 20;
    c.n_threads = 1;
    return c;
  }();
  server::ServerOptions server = [] {
    server::ServerOptions o;
    o.port = 0;
    o.log_requests = false;
    return o;
  }();
  std::vector<std::string> aliases;
  // A Jinja chat template, as --chat-template FILE gives one (nullopt: the model's, here none: ChatML).
  std::optional<std::string> chat_template_jinja;
  // When set, the engine runs on this backend instead of the CPU one (fault injection).
  std::function<std::unique_ptr<engine::Backend>(model::Model&, const engine::EngineConfig&)> backend;
};

// One server with its own model (a Model's activation buffers are not shared between engines).
class TestServer {
 public:
  explicit TestServer(const TestServerConfig& config = {}) {
    path_ = shared_file("models/stories260K.gguf").string();
    if (path_.empty()) return;
    model_ = model::Model::load(path_, 512);
    tokenizer_ = Tokenizer::from_gguf(model_->file());
    const engine::EngineConfig ecfg = engine::with_eog(config.engine, *tokenizer_);
    engine_ = config.backend ? std::make_unique<engine::Engine>(config.backend(*model_, ecfg), ecfg)
                             : std::make_unique<engine::Engine>(*model_, ecfg);
    engine_->start();
    server_ = std::make_unique<server::Server>(config.server);
    port_ = server_->bind();
    server_->start();
    server_->attach(*engine_, *tokenizer_,
                    {path_, config.aliases, std::nullopt,
                     model_->file().try_string("tokenizer.chat_template").value_or(""), config.chat_template_jinja, ""});
  }
  ~TestServer() { stop(); }

  bool ok() const { return server_ != nullptr; }
  int port() const { return port_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  engine::Engine& engine() { return *engine_; }
  server::Server& server() { return *server_; }
  const std::string& model_path() const { return path_; }

  std::unique_ptr<httplib::Client> client() const {
    auto c = std::make_unique<httplib::Client>("127.0.0.1", port_);
    c->set_read_timeout(30, 0);
    return c;
  }

  // Stops the server and the engine, then checks that the pool is consistent and no block is held.
  void stop() {
    if (!server_ || stopped_) return;
    stopped_ = true;
    server_->stop();
    engine_->stop();
    EXPECT_NO_THROW(engine_->check_invariants());
    EXPECT_EQ(engine_->counters().n_blocks_in_use, 0) << "blocks still held after the server stopped";
  }

 private:
  std::string path_;
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<server::Server> server_;
  int port_ = -1;
  bool stopped_ = false;
};

struct HttpResult {
  int status = -1;  // -1: no response (see error)
  int error = 0;    // httplib::Error
  std::string body;
  httplib::Headers headers;
  json body_json() const { return json::parse(body, nullptr, false); }
};

inline HttpResult post(httplib::Client& c, const std::string& path, const std::string& body) {
  HttpResult r;
  auto res = c.Post(path.c_str(), body, "application/json");
  r.error = static_cast<int>(res.error());
  if (res) {
    r.status = res->status;
    r.body = res->body;
    r.headers = res->headers;
  }
  return r;
}

inline HttpResult post(httplib::Client& c, const std::string& path, const json& body) {
  return post(c, path, body.dump());
}

inline HttpResult post(httplib::Client& c, const std::string& path, const char* body) {
  return post(c, path, std::string(body));
}

inline HttpResult get(httplib::Client& c, const std::string& path) {
  HttpResult r;
  if (auto res = c.Get(path.c_str())) {
    r.status = res->status;
    r.body = res->body;
    r.headers = res->headers;
  }
  return r;
}

struct SseEvent {
  std::string event;  // "" when the event has no `event:` line
  std::string data;
};

// Splits a text/event-stream body into events.
inline std::vector<SseEvent> parse_sse(const std::string& body) {
  std::vector<SseEvent> out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) end = body.size();
    SseEvent ev;
    size_t line_start = pos;
    while (line_start < end) {
      size_t line_end = body.find('\n', line_start);
      if (line_end == std::string::npos || line_end > end) line_end = end;
      const std::string line = body.substr(line_start, line_end - line_start);
      if (line.rfind("event: ", 0) == 0) ev.event = line.substr(7);
      if (line.rfind("data: ", 0) == 0) ev.data = line.substr(6);
      line_start = line_end + 1;
    }
    if (!ev.data.empty() || !ev.event.empty()) out.push_back(std::move(ev));
    pos = end + 2;
  }
  return out;
}

// The JSON payloads of an OpenAI stream; `done` tells whether it ended with "data: [DONE]".
inline std::vector<json> openai_chunks(const std::string& body, bool* done) {
  std::vector<json> out;
  *done = false;
  for (const SseEvent& ev : parse_sse(body)) {
    if (ev.data == "[DONE]") {
      *done = true;
      continue;
    }
    out.push_back(json::parse(ev.data));
  }
  return out;
}

// Polls `pred` every 5 ms until it holds or `timeout` passes.
template <typename Pred>
bool wait_for(Pred pred, std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return pred();
}

}  // namespace preface::test
