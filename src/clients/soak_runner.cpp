#include "clients/soak_runner.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "clients/loadgen_workload.h"
#include "clients/soak_attacks.h"
#include "util/error.h"

namespace preface::cli::soak {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
constexpr size_t kMaxExamples = 12;

std::unique_ptr<httplib::Client> client_for(const loadgen::Target& t, double timeout_s) {
  auto c = std::make_unique<httplib::Client>(t.scheme_host_port);
  const auto us = std::chrono::microseconds(static_cast<int64_t>(timeout_s * 1e6));
  c->set_connection_timeout(us);
  c->set_read_timeout(us);
  c->set_write_timeout(us);
  if (!t.api_key.empty()) c->set_bearer_token_auth(t.api_key);
  return c;
}

// The value of the sample line `series` ("name" or "name{labels}") in a Prometheus exposition.
std::optional<double> sample(const std::string& text, const std::string& series) {
  size_t pos = 0;
  while ((pos = text.find(series + " ", pos)) != std::string::npos) {
    if (pos == 0 || text[pos - 1] == '\n') return std::strtod(text.c_str() + pos + series.size() + 1, nullptr);
    pos += series.size();
  }
  return std::nullopt;
}

struct Scrape {
  bool ok = false;  // answered 200 with both gauges
  bool invariants_ok = false;
  int64_t blocks_in_use = -1;
  int64_t n_evictions = -1, n_preemptions = -1;  // counters since the server started
};

Scrape scrape(const loadgen::Target& t) {
  Scrape s;
  const auto res = client_for(t, 30)->Get(t.path_prefix + "/metrics");
  if (!res || res->status != 200) return s;
  const auto inv = sample(res->body, "preface_kv_invariants_ok");
  const auto used = sample(res->body, "preface_kv_blocks{state=\"used\"}");
  s.ok = inv.has_value() && used.has_value();
  s.invariants_ok = inv.value_or(0) == 1;
  s.blocks_in_use = static_cast<int64_t>(used.value_or(-1));
  s.n_evictions = static_cast<int64_t>(sample(res->body, "preface_kv_evictions_total").value_or(-1));
  s.n_preemptions = static_cast<int64_t>(sample(res->body, "preface_preemptions_total").value_or(-1));
  return s;
}

// Shared state of the client threads.
class Shared {
 public:
  // The reference of `key`, or null. Stable: entries are never erased or replaced.
  const std::string* reference(const std::string& key) {
    std::lock_guard lock(mu_);
    const auto it = refs_.find(key);
    return it == refs_.end() ? nullptr : &it->second;
  }
  // Sets the reference of `key` unless another answer got there first; returns the reference.
  const std::string& set_reference(const std::string& key, const std::string& text) {
    std::lock_guard lock(mu_);
    return refs_.try_emplace(key, text).first->second;
  }
  void record(const Request& r, Outcome o, const std::string& why) {
    std::lock_guard lock(mu_);
    report.n[static_cast<size_t>(o)]++;
    if (!why.empty() && report.examples.size() < kMaxExamples)
      report.examples.push_back(std::string(outcome_name(o)) + " " + r.label + ": " + why.substr(0, 300));
  }
  int64_t n_references() {
    std::lock_guard lock(mu_);
    return static_cast<int64_t>(refs_.size());
  }

  Report report;  // counts and examples under mu_

 private:
  std::mutex mu_;
  std::map<std::string, std::string> refs_;  // key -> text
};

// A raw-socket attack as a RequestResult: a slowloris answer's status; a vanished client as such.
loadgen::RequestResult run_attack(const Options& o, const Request& r) {
  loadgen::RequestResult res;
  const RawResult raw = r.attack == Attack::kSlowloris ? slowloris(o.target, r.path, std::min(o.timeout_s, 60.0))
                                                       : send_and_vanish(o.target, r.path, r.body, 20);
  res.http_status = raw.http_status;
  res.error = raw.error;
  res.vanished = r.attack == Attack::kSendAndVanish && raw.error.empty();
  if (res.vanished) res.http_status = 200;  // nothing to compare: what counts is the server's state afterwards
  return res;
}

void execute(const Options& o, const Request& r, Shared& shared) {
  const loadgen::RequestResult res =
      r.attack != Attack::kNone ? run_attack(o, r)
                                : loadgen::post_request(o.target, r.path, r.body, r.stream, o.timeout_s,
                                                        r.vanish_after_chunks);
  const std::string* ref = r.expect == Expect::kText ? shared.reference(r.key) : nullptr;
  std::string why;
  Outcome out = classify(r, res, ref, &why);
  if (out == Outcome::kOk && ref == nullptr) {
    // No reference yet (its request in the reference phase failed): the first answer seen becomes it.
    std::string text = res.text;
    if (!r.stream) response_text(r.path, res.body, &text);
    if (const std::string& first = shared.set_reference(r.key, text); first != text) {
      why = "got '" + text + "', the reference is '" + first + "'";
      out = Outcome::kMismatch;
    }
  }
  shared.record(r, out, why);
}

// Tokens per word of kWords text on this server's tokenizer, and the prompt limit (0: the context from /v1/models).
std::pair<double, int64_t> measure(const loadgen::Target& t, int64_t prompt_limit) {
  auto c = client_for(t, 60);
  const std::string text = loadgen::make_text(loadgen::stream(1, 16, 0), 400);
  const auto tok = c->Post(t.path_prefix + "/tokenize", json{{"content", text}}.dump(), "application/json");
  if (!tok) throw Error("soak: cannot reach " + t.scheme_host_port + ": " + httplib::to_string(tok.error()));
  const json tj = json::parse(tok->body, nullptr, false);
  if (tok->status != 200 || !tj.is_object() || !tj.contains("tokens") || !tj["tokens"].is_array())
    throw Error("soak: POST /tokenize answered HTTP " + std::to_string(tok->status) + ": " + tok->body.substr(0, 200));
  const double per_word = std::max(0.1, static_cast<double>(tj["tokens"].size()) / 400.0);
  if (prompt_limit > 0) return {per_word, prompt_limit};
  int64_t n_ctx = 2048;
  if (const auto m = c->Get(t.path_prefix + "/v1/models"); m && m->status == 200) {
    const json mj = json::parse(m->body, nullptr, false);
    if (mj.is_object() && mj.contains("data") && mj["data"].is_array() && !mj["data"].empty() &&
        mj["data"][0].contains("meta") && mj["data"][0]["meta"].contains("n_ctx") &&
        mj["data"][0]["meta"]["n_ctx"].is_number_integer())
      n_ctx = mj["data"][0]["meta"]["n_ctx"].get<int64_t>();
  }
  return {per_word, n_ctx};
}

}  // namespace

const char* outcome_name(Outcome o) {
  switch (o) {
    case Outcome::kOk: return "ok";
    case Outcome::kExpected4xx: return "expected_4xx";
    case Outcome::kVanished: return "vanished";
    case Outcome::kMismatch: return "mismatch";
    case Outcome::kUnexpectedStatus: return "unexpected_status";
    case Outcome::kTransportError: return "transport_error";
  }
  return "unknown";
}

bool response_text(const std::string& path, const std::string& body, std::string* text) {
  const json j = json::parse(body, nullptr, false);
  if (!j.is_object()) return false;
  if (path == api_path(Api::kMessages)) {
    const auto c = j.find("content");
    if (c == j.end() || !c->is_array()) return false;
    text->clear();
    for (const json& block : *c)
      if (block.is_object() && block.value("type", "") == "text" && block.contains("text") && block["text"].is_string())
        *text += block["text"].get<std::string>();
    return true;
  }
  const auto ch = j.find("choices");
  if (ch == j.end() || !ch->is_array() || ch->empty() || !(*ch)[0].is_object()) return false;
  const json& c = (*ch)[0];
  const json* t = nullptr;
  if (c.contains("text")) t = &c["text"];
  else if (c.contains("message") && c["message"].is_object() && c["message"].contains("content"))
    t = &c["message"]["content"];
  if (t == nullptr || !t->is_string()) return false;
  *text = t->get<std::string>();
  return true;
}

Outcome classify(const Request& r, const loadgen::RequestResult& res, const std::string* ref, std::string* why) {
  const int status = res.http_status;
  if (r.expect == Expect::kTokens) {
    if (status == 200 && res.body.rfind("{\"tokens\":[", 0) == 0) return Outcome::kOk;
    *why = status == 200 ? "not a /tokenize answer: " + res.body.substr(0, 200)
                         : (status == 0 ? res.error : "HTTP " + std::to_string(status));
    return status == 0 ? Outcome::kTransportError : Outcome::kUnexpectedStatus;
  }
  if (r.attack == Attack::kSendAndVanish) return res.vanished ? Outcome::kVanished : Outcome::kTransportError;
  if (r.expect != Expect::kText) {
    const int want = r.expect == Expect::k413 ? 413 : r.expect == Expect::k408 ? 408 : 400;
    if (status == want) return Outcome::kExpected4xx;
    *why = "expected HTTP " + std::to_string(want) + ", got " +
           (status == 0 || !res.error.empty() ? res.error : "HTTP " + std::to_string(status));
    return status == 0 ? Outcome::kTransportError : Outcome::kUnexpectedStatus;
  }
  if (status == 0) {
    *why = res.error;
    return Outcome::kTransportError;
  }
  if (status != 200) {
    *why = res.error;
    return Outcome::kUnexpectedStatus;
  }
  std::string text = res.text;
  if (r.stream && !res.ok && !res.vanished) {
    *why = res.error;
    return res.error.starts_with("error event") ? Outcome::kUnexpectedStatus : Outcome::kTransportError;
  }
  if (!r.stream && !response_text(r.path, res.body, &text)) {
    *why = "unreadable 200 body: " + res.body.substr(0, 200);
    return Outcome::kMismatch;
  }
  if (res.vanished) {
    if (ref != nullptr && !ref->starts_with(text)) {
      *why = "partial text '" + text + "' is not a prefix of the reference '" + *ref + "'";
      return Outcome::kMismatch;
    }
    return Outcome::kVanished;
  }
  if (ref != nullptr && text != *ref) {
    *why = "got '" + text + "', the reference is '" + *ref + "'";
    return Outcome::kMismatch;
  }
  return Outcome::kOk;
}

int64_t Report::n_requests() const {
  int64_t total = 0;
  for (const int64_t v : n) total += v;
  return total;
}

int64_t Report::n_failures() const {
  return n[static_cast<size_t>(Outcome::kMismatch)] + n[static_cast<size_t>(Outcome::kUnexpectedStatus)] +
         n[static_cast<size_t>(Outcome::kTransportError)];
}

bool Report::passed(bool server_checks) const {
  if (n_failures() != 0 || n[static_cast<size_t>(Outcome::kOk)] == 0) return false;
  return !server_checks || (metrics_ok && n_invariant_failures == 0 && kv_blocks_in_use == 0);
}

std::string Report::summary() const {
  std::string s = "requests=" + std::to_string(n_requests());
  for (int i = 0; i < kNumOutcomes; ++i)
    s += std::string(" ") + outcome_name(static_cast<Outcome>(i)) + "=" + std::to_string(n[static_cast<size_t>(i)]);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f", seconds);
  s += " references=" + std::to_string(n_references) + " seconds=" + buf;
  s += " kv_blocks_in_use=" + std::to_string(kv_blocks_in_use) + " kv_invariant_failures=" +
       std::to_string(n_invariant_failures) + " scrapes=" + std::to_string(n_scrapes) +
       " metrics_ok=" + (metrics_ok ? "1" : "0") + " kv_evictions=" + std::to_string(n_evictions) +
       " preemptions=" + std::to_string(n_preemptions);
  return s;
}

Report run(const Options& o) {
  if (o.n_clients < 1) throw Error("soak: --clients must be >= 1");
  Spec spec = o.spec;
  const auto [per_word, prompt_limit] = measure(o.target, spec.limits.max_prompt_tokens);
  spec.limits.max_prompt_tokens = static_cast<int32_t>(prompt_limit);
  // Long prompts: half the limit (at most 1024 tokens, so a soak on two cores still runs many requests); the
  // over-limit prompt: 1.5 x the limit. Both measured in the server's own tokens.
  const int64_t long_tokens = std::min<int64_t>(prompt_limit / 2, 1024);
  const int64_t over_tokens = prompt_limit * 3 / 2 + 64;
  spec.long_words = words_for_tokens(long_tokens, per_word);
  spec.over_words = words_for_tokens(over_tokens, per_word);
  spec.system_words = std::min(spec.system_words, words_for_tokens(prompt_limit / 4, per_word));
  const Workload workload(spec);

  Shared shared;
  shared.report.tokens_per_word = per_word;
  shared.report.long_prompt_tokens = static_cast<int32_t>(long_tokens);
  shared.report.over_prompt_tokens = static_cast<int32_t>(over_tokens);
  // References: every well-formed key once, alone, before any concurrency.
  for (const Request& r : workload.reference_requests()) execute(o, r, shared);

  std::mutex mon_mu;
  std::condition_variable mon_cv;
  bool done = false;
  int64_t n_scrapes = 0, n_bad = 0;
  bool metrics_ok = true;
  const auto note = [&](const Scrape& s) {
    ++n_scrapes;
    metrics_ok = metrics_ok && s.ok;
    if (s.ok && !s.invariants_ok) ++n_bad;
  };
  std::thread monitor([&] {
    if (!o.server_checks) return;
    std::unique_lock lock(mon_mu);
    while (!mon_cv.wait_for(lock, std::chrono::seconds(1), [&] { return done; })) {
      lock.unlock();
      const Scrape s = scrape(o.target);
      lock.lock();
      note(s);
    }
  });

  const auto t0 = Clock::now();
  const auto deadline = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.seconds));
  std::vector<std::thread> clients;
  for (int32_t c = 0; c < o.n_clients; ++c) {
    clients.emplace_back([&, c] {
      for (uint64_t i = 0; Clock::now() < deadline; ++i) execute(o, workload.make(static_cast<uint32_t>(c), i), shared);
    });
  }
  for (std::thread& t : clients) t.join();
  Report report = shared.report;
  report.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  {
    std::lock_guard lock(mon_mu);
    done = true;
  }
  mon_cv.notify_all();
  monitor.join();

  if (o.server_checks) {
    // Vanished clients' requests are cancelled at the engine's next step: give the server a moment to let go.
    Scrape s;
    for (int i = 0; i < 150; ++i) {
      s = scrape(o.target);
      note(s);
      if (!s.ok || s.blocks_in_use == 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    report.kv_blocks_in_use = s.blocks_in_use;
    report.n_evictions = s.n_evictions;
    report.n_preemptions = s.n_preemptions;
  }
  report.n_scrapes = n_scrapes;
  report.n_invariant_failures = n_bad;
  report.metrics_ok = metrics_ok;
  report.n_references = shared.n_references();
  return report;
}

}  // namespace preface::cli::soak
