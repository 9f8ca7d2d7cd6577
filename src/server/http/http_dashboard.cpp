// The cache dashboard: the page (server/http/dashboard_page.h), Debian's Chart.js beside it, and the JSON it polls;
// and the chat page (server/http/chat_page.h).
//
// Who sees what (GET /v1/cache/stats): the admin key (--admin-key) sees every tenant's totals, history and cached
// prefixes; a tenant key sees its own totals and history and the prefixes of its own namespaces, never another
// tenant's tokens; without keys the one shared tenant sees everything. The pool's occupancy and eviction/expiry
// counts are global block counts and are shown to every viewer (they reveal no content).
//
// The page itself is static and open (a browser cannot attach a key to a navigation); it sends the key of its
// login field, kept in sessionStorage, as `Authorization: Bearer` with each request it makes (also accepted as
// /dashboard#key=KEY, moved to sessionStorage and out of the address bar at once: a fragment never reaches the
// server or its logs).
#include <fstream>
#include <optional>
#include <sstream>
#include <unordered_set>

#include "server/http/auth.h"
#include "server/http/chat_page.h"
#include "server/http/dashboard_page.h"
#include "server/http/http_internal.h"
#include "server/http/prefix_tree.h"

namespace preface::server {
namespace {

using nlohmann::json;

// Debian's libjs-chart.js (3.x ships chart.min.js; 4.x chart.umd.js), first found wins.
constexpr const char* kChartJsPaths[] = {
    "/usr/share/javascript/chart.js/chart.umd.js",
    "/usr/share/javascript/chart.js/chart.min.js",
    "/usr/share/javascript/chart.js/Chart.min.js",
};

// The file, read once (nullopt when libjs-chart.js is not installed).
const std::optional<std::string>& chartjs_source() {
  static const std::optional<std::string> source = []() -> std::optional<std::string> {
    for (const char* path : kChartJsPaths) {
      std::ifstream in(path, std::ios::binary);
      if (!in) continue;
      std::ostringstream text;
      text << in.rdbuf();
      return text.str();
    }
    return std::nullopt;
  }();
  return source;
}

json node_json(const PrefixNode& n, const Tokenizer& tok, const std::unordered_map<kv::Digest, std::string, kv::DigestHash>* owners) {
  std::string text;
  for (const int32_t id : n.tokens) text += tok.token_to_bytes(id);
  json j = {{"text", is_valid_utf8(text) ? json(text) : json(std::string())},
            {"first_tokens", n.tokens},
            {"blocks", n.n_blocks},
            {"tokens", n.n_tokens},
            {"subtree_blocks", n.subtree_blocks},
            {"hits", n.hits},
            {"age_s", n.age_s},
            {"pins", n.pins},
            {"refs", n.refs},
            {"hidden_children", n.n_hidden_children},
            {"children", json::array()}};
  if (!is_valid_utf8(text)) {  // a token boundary inside a character: show what decodes
    std::string valid;
    for (const int32_t id : n.tokens) {
      const std::string piece = tok.token_to_bytes(id);
      if (is_valid_utf8(valid + piece)) valid += piece;
    }
    j["text"] = valid;
  }
  if (owners != nullptr) {
    const auto it = owners->find(n.root);
    j["tenant"] = it != owners->end() ? json(it->second) : json(nullptr);
  }
  for (const PrefixNode& c : n.children) j["children"].push_back(node_json(c, tok, owners));
  return j;
}

}  // namespace

void dashboard_page(HttpState&, const httplib::Request&, httplib::Response& res) {
  res.set_header("Cache-Control", "no-store");
  res.set_header("Content-Security-Policy",
                 "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'unsafe-inline'");
  res.set_content(std::string(kDashboardHtml), "text/html; charset=utf-8");
}

void chat_page(HttpState&, const httplib::Request&, httplib::Response& res) {
  res.set_header("Cache-Control", "no-store");
  res.set_header("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'");
  res.set_content(std::string(kChatHtml), "text/html; charset=utf-8");
}

void dashboard_chartjs(HttpState&, const httplib::Request&, httplib::Response& res) {
  const std::optional<std::string>& js = chartjs_source();
  if (!js) {
    res.status = 404;
    res.set_content("// Chart.js not found: install Debian's libjs-chart.js\n", "text/javascript");
    return;
  }
  res.set_header("Cache-Control", "max-age=3600");
  res.set_content(*js, "text/javascript; charset=utf-8");
}

void cache_stats(HttpState& state, ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  std::optional<std::string> tenant;  // nullopt: every tenant
  const bool admin = is_admin(state.options, presented_key(req));
  if (!admin) {
    const std::string t = authenticate(state.options, req);  // 401 for a missing or unknown key
    if (!state.options.api_keys.empty()) tenant = t;
  }
  const engine::EngineCounters counters = ctx.engine.counters();
  state.cache_stats.maybe_sample(counters);

  std::function<bool(const kv::Digest&)> visible;
  std::unordered_set<kv::Digest, kv::DigestHash> own;
  if (tenant) {
    const std::vector<kv::Digest> ns = ctx.tenants.namespaces_of(*tenant, SIZE_MAX);
    own.insert(ns.begin(), ns.end());
    visible = [&own](const kv::Digest& root) { return own.contains(root); };
  }
  const auto blocks = state.cache_stats.cached_blocks(ctx.engine);
  const PrefixTree tree = build_prefix_tree(*blocks, visible);
  std::optional<std::unordered_map<kv::Digest, std::string, kv::DigestHash>> owners;
  if (!tenant) owners = ctx.tenants.owners();

  json prefixes = json::array();
  for (const PrefixNode& n : tree.roots) prefixes.push_back(node_json(n, ctx.tokenizer, owners ? &*owners : nullptr));
  const PoolSample pool = PoolSample::of(counters);
  send_json(res, {{"scope", tenant ? "tenant" : "all"},
                  {"tenant", tenant ? json(*tenant) : json(nullptr)},
                  {"now", std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count()},
                  {"model",
                   {{"id", ctx.model_id},
                    {"n_params", counters.n_params},
                    {"prefill_tokens_per_s", counters.prefill_tokens_per_s},
                    {"block_size", ctx.model.block_size},
                    {"kv_blocks", ctx.model.n_kv_blocks}}},
                  {"totals", totals_json(state.cache_stats.totals(tenant))},
                  {"pool",
                   {{"in_use", pool.n_in_use},
                    {"cached", pool.n_cached},
                    {"pinned", pool.n_pinned},
                    {"free", pool.n_free},
                    {"total", pool.n_total},
                    {"evictions", pool.n_evictions},
                    {"expired", pool.n_expired}}},
                  {"series", state.cache_stats.series_json(tenant)},
                  {"prefixes", prefixes},
                  {"prefix_tree",
                   {{"root_chains", tree.n_root_chains}, {"blocks", tree.n_blocks}, {"truncated", tree.truncated}}}});
}

}  // namespace preface::server
