// The hosted APIs' cache diagnostics (server/api/request_fingerprint.h) on /v1/messages and /v1/chat/completions.
#include "server/http/auth.h"
#include "server/http/http_internal.h"

namespace preface::server {
namespace {

using nlohmann::json;

const char* anthropic_type(Divergence d) {
  switch (d) {
    case Divergence::Model: return "model_changed";
    case Divergence::System: return "system_changed";
    case Divergence::Tools: return "tools_changed";
    case Divergence::Messages: return "messages_changed";
    case Divergence::None: break;
  }
  return nullptr;
}

const char* openai_type(Divergence d) {
  switch (d) {
    case Divergence::Model: return "model_changed";
    case Divergence::Tools: return "tools_changed";
    case Divergence::System:
    case Divergence::Messages: return "input_changed";
    case Divergence::None: break;
  }
  return nullptr;
}

// The fingerprint of this request (stored under the response id) and the comparison with `previous_id`'s.
std::optional<FingerprintComparison> fingerprint_and_compare(HttpState& state, ServerContext& ctx,
                                                             const httplib::Request& req, int32_t n_prompt,
                                                             const char* system_key, const std::string& response_id,
                                                             const std::optional<std::string>& previous_id,
                                                             bool* found) {
  const std::string tenant = authenticate(state.options, req);
  // The key order of the client's JSON matters (a reordered tool schema renders differently): re-parse keeping it.
  const auto ordered = nlohmann::ordered_json::parse(req.body, nullptr, false);
  RequestFingerprint fp = fingerprint_request(ordered, system_key, n_prompt);
  std::optional<FingerprintComparison> result;
  *found = false;
  if (previous_id) {
    if (const auto previous = ctx.fingerprints.get(*previous_id, tenant)) {
      *found = true;
      result = compare_fingerprints(*previous, fp);
    }
  }
  ctx.fingerprints.put(response_id, tenant, std::move(fp));
  return result;
}

}  // namespace

void add_anthropic_diagnostics(HttpState& state, ServerContext& ctx, const httplib::Request& req, const json& body,
                               int32_t n_prompt, ResponseFormat& format) {
  const auto it = body.find("diagnostics");
  if (it == body.end() || it->is_null()) return;
  const JsonFields f(body);
  const json* d = f.object("diagnostics");
  const JsonFields df(*d, "diagnostics.");
  const std::optional<std::string> previous = df.string("previous_message_id");
  bool found = false;
  const auto cmp = fingerprint_and_compare(state, ctx, req, n_prompt, "system", format.id(), previous, &found);
  json reason = nullptr;
  if (previous && !found) {
    reason = {{"type", "previous_message_not_found"}};
  } else if (cmp && cmp->where != Divergence::None) {
    reason = {{"type", anthropic_type(cmp->where)}, {"cache_missed_input_tokens", cmp->missed_tokens}};
    if (cmp->near_miss != nullptr) reason["near_miss"] = cmp->near_miss;
  }
  format.add_field("diagnostics", {{"cache_miss_reason", reason}});
}

void add_openai_diagnostics(HttpState& state, ServerContext& ctx, const httplib::Request& req, const json& body,
                            int32_t n_prompt, ResponseFormat& format) {
  const auto it = body.find("prompt_cache_options");
  if (it == body.end() || it->is_null()) return;
  const JsonFields f(body);
  const json* o = f.object("prompt_cache_options");
  const JsonFields of(*o, "prompt_cache_options.");
  const std::optional<std::string> comparison = of.string("comparison_response_id");
  (void)of.string("mode");
  bool found = false;
  const auto cmp = fingerprint_and_compare(state, ctx, req, n_prompt, "", format.id(), comparison, &found);
  if (!comparison) return;
  json out;
  if (!found) {
    out = {{"type", "comparison_response_not_found"}};
  } else if (cmp->where == Divergence::None) {
    out = {{"type", "cache_hit"}};
  } else {
    out = {{"type", "cache_miss"}, {"cache_missed_tokens", cmp->missed_tokens},
           {"reason", {{"type", openai_type(cmp->where)}}}};
    if (cmp->near_miss != nullptr) out["reason"]["near_miss"] = cmp->near_miss;
  }
  format.add_field("prompt_cache_diagnostics", out);
}

}  // namespace preface::server
