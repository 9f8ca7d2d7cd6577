#include "server/api/context.h"

#include <chrono>
#include <cstdio>

#include "server/api/api_error.h"

namespace preface::server {

ServerContext::ServerContext(engine::Engine& engine_, const Tokenizer& tokenizer_, ChatTemplate chat_template_,
                             std::string model_id_, std::vector<std::string> accepted_names_, bool strict_model_names_,
                             ServerLimits limits_, Metrics& metrics_)
    : engine(engine_),
      model(engine_.describe()),
      tokenizer(tokenizer_),
      chat_template(chat_template_),
      chat_renderer(std::make_shared<const chat::ChatRenderer>(
          chat_template_, tokenizer_.bos_id() >= 0 ? std::optional(chat_bos_text(tokenizer_)) : std::nullopt,
          tokenizer_.eos_id() >= 0 ? std::optional(chat_eos_text(tokenizer_)) : std::nullopt)),
      model_id(std::move(model_id_)),
      accepted_names(std::move(accepted_names_)),
      strict_model_names(strict_model_names_),
      limits(limits_),
      metrics(metrics_),
      responses(limits_.max_stored_responses, limits_.max_stored_response_bytes,
                std::chrono::seconds(limits_.stored_response_ttl_s)),
      created_unix(unix_now()),
      tenants(2 * static_cast<size_t>(model.n_kv_blocks) + 64),
      rng_(std::random_device{}()),
      id_salt_(rng_()) {}

namespace {

// The ids of a vocabulary's fill-in-the-middle tokens (prefix, suffix, middle), by the pieces each family uses.
std::optional<std::array<int32_t, 3>> find_fim_tokens(const Tokenizer& tok) {
  static constexpr std::array<std::array<const char*, 3>, 5> kFamilies = {{
      {"<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"},                                    // Qwen2.5/3-Coder
      {"<fim_prefix>", "<fim_suffix>", "<fim_middle>"},                                          // StarCoder
      {"<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>", "<\xef\xbd\x9c" "fim\xe2\x96\x81hole\xef\xbd\x9c>",
       "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>"},                                   // DeepSeek Coder
      {"\xe2\x96\x81<PRE>", "\xe2\x96\x81<SUF>", "\xe2\x96\x81<MID>"},                           // CodeLlama
      {"<|fim_begin|>", "<|fim_hole|>", "<|fim_end|>"},
  }};
  std::array<std::array<int32_t, 3>, kFamilies.size()> ids;
  for (auto& family : ids) family.fill(-1);
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {  // one pass over the vocabulary
    for (size_t f = 0; f < kFamilies.size(); ++f) {
      for (size_t k = 0; k < 3; ++k) {
        if (ids[f][k] < 0 && tok.piece(id) == kFamilies[f][k]) ids[f][k] = id;
      }
    }
  }
  for (const auto& family : ids) {
    if (family[0] >= 0 && family[1] >= 0 && family[2] >= 0) return family;
  }
  return std::nullopt;
}

}  // namespace

const std::optional<std::array<int32_t, 3>>& ServerContext::fim_tokens() const {
  std::call_once(fim_once_, [&] { fim_ = find_fim_tokens(tokenizer); });
  return fim_;
}

grammar::GrammarCache& ServerContext::grammars() {
  std::call_once(grammars_once_, [&] {
    grammars_ = std::make_unique<grammar::GrammarCache>(
        grammar::TokenVocab::from_tokenizer(tokenizer, tool_calls().marker_tokens));
  });
  return *grammars_;
}

std::string ServerContext::new_call_id() {
  const grammar::ToolFormat* f = tool_calls().format;
  if (f == nullptr || !f->short_call_ids) return new_id("call_");
  static constexpr char kAlnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string id(9, 'a');
  std::lock_guard lock(mu_);
  for (char& c : id) c = kAlnum[rng_() % (sizeof(kAlnum) - 1)];
  return id;
}

const ToolCallSetup& ServerContext::tool_calls() const {
  std::call_once(tool_calls_once_, [&] { tool_calls_ = detect_tool_calls(*chat_renderer, tokenizer); });
  return tool_calls_;
}

int32_t ServerContext::ctx_len() const { return model.ctx_len; }

void ServerContext::check_model(const std::optional<std::string>& model) const {
  if (!model || !strict_model_names || *model == model_id) return;
  for (const std::string& name : accepted_names) {
    if (*model == name) return;
  }
  throw ApiError(404, "the model '" + *model + "' does not exist; this server serves '" + model_id + "'", "model",
                 "model_not_found");
}

std::string ServerContext::new_id(std::string_view prefix) {
  // A counter mixed with the per-server salt (splitmix64), so ids are unique and do not look sequential.
  const uint64_t n = next_id_.fetch_add(1);
  uint64_t x = n + id_salt_;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016llx%08llx", static_cast<unsigned long long>(x),
                static_cast<unsigned long long>(n & 0xffffffffull));
  return std::string(prefix) + buf;
}

uint64_t ServerContext::random_seed() {
  std::lock_guard lock(mu_);
  return rng_();
}

int64_t ServerContext::unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::vector<int32_t> ServerContext::chat_prompt(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                                const nlohmann::ordered_json& kwargs) const {
  return encode_chat_prompt(tokenizer, render_chat(messages, add_generation_prompt, kwargs));
}

nlohmann::ordered_json template_kwargs_with_defaults(const nlohmann::ordered_json& kwargs) {
  nlohmann::ordered_json out = kwargs.is_object() ? kwargs : nlohmann::ordered_json::object();
  if (!out.contains("enable_thinking")) out["enable_thinking"] = true;
  return out;
}

chat::RenderedChat ServerContext::render_chat(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                              const nlohmann::ordered_json& kwargs) const {
  try {
    return chat_renderer->render(messages, add_generation_prompt, template_kwargs_with_defaults(kwargs));
  } catch (const ApiError&) {
    throw;
  } catch (const Error& e) {
    throw ApiError(400, e.what(), "messages");
  }
}

std::vector<int32_t> ServerContext::chat_prompt_json(const nlohmann::ordered_json& messages,
                                                     const nlohmann::ordered_json& tools, bool add_generation_prompt,
                                                     const nlohmann::ordered_json& kwargs) const {
  return encode_chat_prompt(tokenizer, render_chat_json(messages, tools, add_generation_prompt, kwargs));
}

chat::RenderedChat ServerContext::render_chat_json(const nlohmann::ordered_json& messages,
                                                   const nlohmann::ordered_json& tools, bool add_generation_prompt,
                                                   const nlohmann::ordered_json& kwargs) const {
  if (!chat_renderer->is_jinja() && tools.is_array() && !tools.empty()) {
    throw ApiError(400, "tools need a Jinja chat template that renders them (the model's, or --chat-template FILE); "
                        "this server renders the built-in '" + chat_renderer->name() + "' template", "tools");
  }
  try {
    return chat_renderer->render_json(messages, tools, add_generation_prompt, template_kwargs_with_defaults(kwargs));
  } catch (const ApiError&) {
    throw;
  } catch (const Error& e) {
    throw ApiError(400, e.what(), "messages");
  }
}

std::string sse_data(const nlohmann::json& j) { return "data: " + dump_json(j) + "\n\n"; }

nlohmann::json cache_savings_json(const engine::RequestStats& stats) {
  return {{"tokens", stats.n_cached_tokens}, {"flops", stats.saved_flops}, {"seconds", stats.saved_seconds}};
}

std::string sse_event(const std::string& name, const nlohmann::json& j) {
  return "event: " + name + "\ndata: " + dump_json(j) + "\n\n";
}

std::string token_text(const Tokenizer& tok, int32_t id) { return tok.token_to_bytes(id); }

bool is_valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      n = 1, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3, cp = c & 0x07;
    } else {
      return false;
    }
    for (size_t k = 1; k <= n; ++k) {
      if (i + k >= s.size()) return false;
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    // Overlong forms, surrogates and values above U+10FFFF are invalid.
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n + 1;
  }
  return true;
}

nlohmann::json byte_array(const std::string& s) {
  nlohmann::json out = nlohmann::json::array();
  for (const char c : s) out.push_back(static_cast<int>(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace preface::server
