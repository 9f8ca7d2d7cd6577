// `preface verify --url URL -p PROMPT`: shadow verification from outside, against any OpenAI-compatible server that
// reports logprobs on /v1/completions. Sends the prompt three times (greedy, one token, top-N logprobs): once to
// fill the cache, once more (a hit), and once with the cache bypassed (preface's "cache": false, also llama.cpp's
// "cache_prompt": false; --bypass sets other fields); the hit's and the cold answer's logprobs of the first
// generated position must be equal bit for bit (JSON numbers compare as doubles; a float logprob is exact in one).
// Exit status: 0 equal, 1 different, 2 could not verify (an error, or a server without logprobs).
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "util/error.h"

namespace preface::cli {
namespace {

using nlohmann::json;

struct VerifyOptions {
  std::string url = "http://127.0.0.1:8080";
  std::string prompt;
  std::string model;
  std::string api_key;
  std::string bypass = R"({"cache": false, "cache_prompt": false})";
  int32_t top_logprobs = 5;
  int32_t timeout_s = 120;
};

json complete(httplib::Client& client, const VerifyOptions& o, const json& extra) {
  json body = {{"prompt", o.prompt}, {"max_tokens", 1}, {"temperature", 0}, {"logprobs", o.top_logprobs}};
  if (!o.model.empty()) body["model"] = o.model;
  for (const auto& [k, v] : extra.items()) body[k] = v;
  httplib::Headers headers;
  if (!o.api_key.empty()) headers.emplace("Authorization", "Bearer " + o.api_key);
  const auto res = client.Post("/v1/completions", headers, body.dump(), "application/json");
  if (!res) throw Error("no answer from " + o.url + ": " + httplib::to_string(res.error()));
  if (res->status != 200) throw Error("HTTP " + std::to_string(res->status) + ": " + res->body);
  json j = json::parse(res->body, nullptr, false);
  if (j.is_discarded() || !j.contains("choices") || j["choices"].empty()) throw Error("not a completion: " + res->body);
  return j;
}

// choices[0].logprobs, or an Error naming what is missing.
const json& logprobs_of(const json& response) {
  const json& choice = response["choices"][0];
  if (!choice.contains("logprobs") || !choice["logprobs"].is_object()) {
    throw Error("the server reported no logprobs: verification needs them");
  }
  return choice["logprobs"];
}

int64_t cached_tokens(const json& response) {
  const json* u = response.contains("usage") ? &response["usage"] : nullptr;
  if (u == nullptr || !u->contains("prompt_tokens_details") || !(*u)["prompt_tokens_details"].is_object()) return -1;
  return (*u)["prompt_tokens_details"].value("cached_tokens", int64_t{-1});
}

// The first difference between two completions logprobs objects, in words.
std::string first_difference(const json& hit, const json& cold) {
  const json& ht = hit.value("top_logprobs", json::array());
  const json& ct = cold.value("top_logprobs", json::array());
  if (!ht.empty() && !ct.empty()) {
    for (const auto& [token, lp] : ht[0].items()) {
      if (!ct[0].contains(token)) return "alternative " + json(token).dump() + " only in the hit's top logprobs";
      if (ct[0][token] != lp) {
        return "alternative " + json(token).dump() + ": hit " + lp.dump() + ", cold " + ct[0][token].dump();
      }
    }
  }
  if (hit.value("tokens", json()) != cold.value("tokens", json())) {
    return "token: hit " + hit.value("tokens", json()).dump() + ", cold " + cold.value("tokens", json()).dump();
  }
  return "token logprob: hit " + hit.value("token_logprobs", json()).dump() + ", cold " +
         cold.value("token_logprobs", json()).dump();
}

int run_verify(const VerifyOptions& o) {
  const json bypass = json::parse(o.bypass, nullptr, false);
  if (!bypass.is_object()) throw Error("--bypass must be a JSON object, got: " + o.bypass);
  httplib::Client client(o.url);
  client.set_read_timeout(o.timeout_s, 0);
  client.set_connection_timeout(10, 0);
  try {
    (void)complete(client, o, json::object());  // fills the cache
    const json hit = complete(client, o, json::object());
    const json cold = complete(client, o, bypass);
    const json& hl = logprobs_of(hit);
    const json& cl = logprobs_of(cold);
    const int64_t n_hit = cached_tokens(hit), n_cold = cached_tokens(cold);
    std::printf("hit:  %s cached tokens\ncold: %s cached tokens\n",
                n_hit < 0 ? "?" : std::to_string(n_hit).c_str(), n_cold < 0 ? "?" : std::to_string(n_cold).c_str());
    if (n_hit == 0) std::printf("note: the second request did not hit the cache; both answers are cold\n");
    if (n_cold > 0) std::printf("note: the bypass request still reported cached tokens: --bypass may be wrong\n");
    if (hl == cl && hit["choices"][0].value("text", "") == cold["choices"][0].value("text", "")) {
      std::printf("match: the first generated position's logprobs are identical (top %d)\n", o.top_logprobs);
      return 0;
    }
    std::printf("MISMATCH: %s\n", first_difference(hl, cl).c_str());
    return 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "preface verify: %s\n", e.what());
    return 2;
  }
}

}  // namespace

void register_verify(CLI::App& app) {
  auto opts = std::make_shared<VerifyOptions>();
  CLI::App* cmd = app.add_subcommand(
      "verify", "Check a server's prefix cache from outside: a hit's logprobs must equal a cold recompute's");
  cmd->add_option("--url", opts->url, "Server base URL")->capture_default_str();
  cmd->add_option("-p,--prompt", opts->prompt, "Prompt (long enough to fill at least one KV block)")->required();
  cmd->add_option("--model", opts->model, "The request's model field");
  cmd->add_option("--api-key", opts->api_key, "Sent as Authorization: Bearer")->envname("PREFACE_API_KEY");
  cmd->add_option("--bypass", opts->bypass, "JSON fields that make the server skip its cache")->capture_default_str();
  cmd->add_option("--top-logprobs", opts->top_logprobs, "Alternatives compared")
      ->check(CLI::Range(1, 20))
      ->capture_default_str();
  cmd->add_option("--timeout", opts->timeout_s, "Seconds to wait for each answer")->capture_default_str();
  cmd->callback([opts] {
    const int rc = run_verify(*opts);
    if (rc != 0) std::exit(rc);
  });
}

}  // namespace preface::cli
