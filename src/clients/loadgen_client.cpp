#include "clients/loadgen_client.h"

#include <httplib.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <regex>

#include "util/error.h"

namespace preface::cli::loadgen {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

std::unique_ptr<httplib::Client> make_client(const Target& t, double timeout_s) {
  auto c = std::make_unique<httplib::Client>(t.scheme_host_port);
  if (!c->is_valid()) throw Error("cannot connect to '" + t.scheme_host_port + "' (only http:// is supported)");
  const auto timeout = std::chrono::duration<double>(timeout_s);
  c->set_connection_timeout(std::chrono::duration_cast<std::chrono::microseconds>(timeout));
  c->set_read_timeout(std::chrono::duration_cast<std::chrono::microseconds>(timeout));
  c->set_write_timeout(std::chrono::duration_cast<std::chrono::microseconds>(timeout));
  if (!t.api_key.empty()) c->set_bearer_token_auth(t.api_key);
  return c;
}

// Consumes the server-sent events of a completion stream as they arrive. Events are separated by a blank line;
// only their "data:" lines matter. `now_s` is the time the bytes arrived.
class SseReader {
 public:
  explicit SseReader(RequestResult& r) : r_(r) {}

  void feed(std::string_view bytes, double now_s) {
    buf_.append(bytes);
    for (;;) {
      size_t end = buf_.find("\n\n");
      size_t sep = 2;
      if (const size_t crlf = buf_.find("\r\n\r\n"); crlf < end) {
        end = crlf;
        sep = 4;
      }
      if (end == std::string::npos) return;
      event(std::string_view(buf_).substr(0, end), now_s);
      buf_.erase(0, end + sep);
    }
  }
  bool done() const { return done_; }
  int64_t n_text_chunks() const { return n_text_chunks_; }

 private:
  void event(std::string_view ev, double now_s) {
    while (!ev.empty()) {
      const size_t nl = ev.find('\n');
      std::string_view line = ev.substr(0, nl);
      ev = nl == std::string_view::npos ? std::string_view() : ev.substr(nl + 1);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (!line.starts_with("data:")) continue;
      line.remove_prefix(5);
      if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
      data(line, now_s);
    }
  }

  void data(std::string_view payload, double now_s) {
    if (payload == "[DONE]") {
      done_ = true;
      return;
    }
    const json j = json::parse(payload, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      fail("unparseable stream event: " + std::string(payload.substr(0, 200)));
      return;
    }
    if (j.contains("error")) {
      fail("error event: " + j["error"].dump());
      return;
    }
    std::string piece;
    if (const auto it = j.find("choices"); it != j.end() && it->is_array() && !it->empty()) {
      const json& c = (*it)[0];
      if (c.contains("text") && c["text"].is_string()) piece = c["text"].get<std::string>();
      if (c.contains("delta") && c["delta"].is_object() && c["delta"].contains("content") &&
          c["delta"]["content"].is_string())
        piece = c["delta"]["content"].get<std::string>();
    }
    // Anthropic's /v1/messages events (OpenAI chunks have no "type").
    if (const auto t = j.find("type"); t != j.end() && t->is_string()) {
      if (*t == "message_stop") done_ = true;
      const auto d = j.find("delta");
      if (*t == "content_block_delta" && d != j.end() && d->is_object() && d->contains("text") &&
          (*d)["text"].is_string())
        piece = (*d)["text"].get<std::string>();
    }
    if (!piece.empty()) {
      if (n_text_chunks_ == 0) r_.ttft_s = now_s;
      else r_.itl_s.push_back(now_s - last_text_s_);
      last_text_s_ = now_s;
      ++n_text_chunks_;
      r_.text += piece;
    }
    if (const auto it = j.find("usage"); it != j.end() && it->is_object()) {
      r_.has_usage = true;
      r_.n_prompt_tokens = it->value("prompt_tokens", int64_t{0});
      r_.n_completion_tokens = it->value("completion_tokens", int64_t{0});
      if (const auto d = it->find("prompt_tokens_details"); d != it->end() && d->is_object())
        r_.n_cached_tokens = d->value("cached_tokens", int64_t{0});
    }
  }

  void fail(std::string why) {
    if (r_.error.empty()) r_.error = std::move(why);
  }

  RequestResult& r_;
  std::string buf_;  // bytes received and not yet split into events
  bool done_ = false;
  int64_t n_text_chunks_ = 0;
  double last_text_s_ = 0;
};

}  // namespace

Target parse_url(const std::string& url, const std::string& api_key) {
  static const std::regex re(R"(^(https?://[^/?#\s]+)(/[^?#\s]*)?$)");
  std::smatch m;
  if (!std::regex_match(url, m, re)) throw Error("--url must look like http://host:port, got '" + url + "'");
  Target t{m[1].str(), m[2].str(), api_key};
  while (!t.path_prefix.empty() && t.path_prefix.back() == '/') t.path_prefix.pop_back();
  if (t.path_prefix.ends_with("/v1")) t.path_prefix.resize(t.path_prefix.size() - 3);
  return t;
}

RequestResult run_request(const Target& target, const RequestParams& p, double timeout_s) {
  RequestResult r;
  auto client = make_client(target, timeout_s);
  httplib::Request req;
  req.method = "POST";
  req.path = target.path_prefix + "/v1/completions";
  req.body = json{{"model", p.model},
                  {"prompt", p.prompt},
                  {"max_tokens", p.max_tokens},
                  {"temperature", p.temperature},
                  {"ignore_eos", p.ignore_eos},
                  {"stream", true},
                  {"stream_options", {{"include_usage", true}}}}
                 .dump();
  req.set_header("Content-Type", "application/json");
  if (!p.session_id.empty()) req.set_header("X-Session-Id", p.session_id);
  SseReader sse(r);
  std::string error_body;  // [<= 4096 bytes] the body of a non-2xx answer
  int status = 0;
  req.response_handler = [&](const httplib::Response& res) {
    status = res.status;
    return true;
  };
  const auto t0 = Clock::now();
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    if (status < 200 || status >= 300) {
      error_body.append(data, std::min(n, 4096 - std::min<size_t>(4096, error_body.size())));
      return true;
    }
    sse.feed(std::string_view(data, n), std::chrono::duration<double>(Clock::now() - t0).count());
    return r.error.empty();
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  const bool sent = client->send(req, res, err);
  r.e2e_s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (status != 0 && (status < 200 || status >= 300)) {
    r.error = "HTTP " + std::to_string(status) + ": " + error_body;
  } else if (!r.error.empty()) {
    // an error event or a malformed stream, already described
  } else if (!sent) {
    r.error = "request failed: " + httplib::to_string(err);
  } else if (!sse.done() && !r.has_usage) {
    r.error = "the stream ended without [DONE] or usage";
  } else {
    r.ok = true;
  }
  return r;
}

RequestResult post_request(const Target& target, const std::string& path, const std::string& body, bool stream,
                           double timeout_s, int32_t vanish_after_chunks) {
  constexpr size_t kMaxBodyBytes = 1u << 20, kMaxErrorBytes = 4096;
  RequestResult r;
  auto client = make_client(target, timeout_s);
  httplib::Request req;
  req.method = "POST";
  req.path = target.path_prefix + path;
  req.body = body;
  req.set_header("Content-Type", "application/json");
  SseReader sse(r);
  req.response_handler = [&](const httplib::Response& res) {
    r.http_status = res.status;
    return true;
  };
  const auto t0 = Clock::now();
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    const bool is_2xx = r.http_status >= 200 && r.http_status < 300;
    if (!is_2xx || !stream) {
      const size_t cap = is_2xx ? kMaxBodyBytes : kMaxErrorBytes;
      r.body.append(data, std::min(n, cap - std::min(cap, r.body.size())));
      return true;
    }
    sse.feed(std::string_view(data, n), std::chrono::duration<double>(Clock::now() - t0).count());
    if (vanish_after_chunks > 0 && sse.n_text_chunks() >= vanish_after_chunks && !sse.done()) {
      r.vanished = true;
      return false;  // httplib cancels the request and closes the socket
    }
    return r.error.empty();
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  const bool sent = client->send(req, res, err);
  r.e2e_s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (r.http_status != 0 && (r.http_status < 200 || r.http_status >= 300)) {
    r.error = "HTTP " + std::to_string(r.http_status) + ": " + r.body;
  } else if (r.vanished) {
    r.error = "closed by the client after " + std::to_string(sse.n_text_chunks()) + " text chunks";
  } else if (!r.error.empty()) {
    // an error event or a malformed stream, already described
  } else if (!sent) {
    r.error = "request failed: " + httplib::to_string(err);
  } else if (stream && !sse.done()) {
    r.error = "the stream ended without [DONE] or message_stop";
  } else {
    r.ok = true;
  }
  return r;
}

std::string first_model(const Target& target) {
  auto client = make_client(target, 30.0);
  const auto res = client->Get(target.path_prefix + "/v1/models");
  if (!res) throw Error("cannot reach " + target.scheme_host_port + ": " + httplib::to_string(res.error()));
  if (res->status != 200) throw Error("GET /v1/models answered HTTP " + std::to_string(res->status));
  const json j = json::parse(res->body, nullptr, false);
  if (j.is_discarded() || !j.contains("data") || !j["data"].is_array() || j["data"].empty() ||
      !j["data"][0].contains("id") || !j["data"][0]["id"].is_string())
    throw Error("GET /v1/models listed no model; pass --model");
  return j["data"][0]["id"].get<std::string>();
}

}  // namespace preface::cli::loadgen
