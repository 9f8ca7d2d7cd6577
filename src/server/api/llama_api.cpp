#include "server/api/llama_api.h"

#include <array>

namespace preface::server {
namespace {

using nlohmann::json;

}  // namespace

OpenAIRequest parse_llama_completion(const json& body, ServerContext& ctx) {
  return parse_completion_request(body, ctx);  // n_predict -1 (llama.cpp's "no limit") is the default there
}

OpenAIRequest parse_llama_infill(const json& body, ServerContext& ctx) {
  const JsonFields f(body);
  const auto& fim = ctx.fim_tokens();
  if (!fim) {
    throw ApiError(400, "the model's vocabulary has no fill-in-the-middle tokens, so /infill is not available",
                   "input_prefix");
  }
  if (const json* extra = f.array("input_extra"); extra != nullptr && !extra->empty()) {
    f.fail("input_extra", "is not supported yet (send the context in input_prefix)");
  }
  const std::string prefix = f.string("input_prefix").value_or("");
  const std::string suffix = f.string("input_suffix").value_or("");
  const std::string middle = f.string("prompt").value_or("");
  const Tokenizer& tok = ctx.tokenizer;
  std::vector<int32_t> ids;
  if (tok.add_bos_default() && tok.bos_id() >= 0) ids.push_back(tok.bos_id());
  const auto append = [&](int32_t marker, const std::string& text) {
    ids.push_back(marker);
    const std::vector<int32_t> t = tok.encode(text, false);
    ids.insert(ids.end(), t.begin(), t.end());
  };
  append((*fim)[0], prefix);
  append((*fim)[1], suffix);
  append((*fim)[2], middle);
  json translated = body;
  for (const char* k : {"input_prefix", "input_suffix", "input_extra"}) translated.erase(k);
  translated["prompt"] = ids;
  return parse_completion_request(translated, ctx);
}

json llama_props(const ServerContext& ctx) {
  const Tokenizer& tok = ctx.tokenizer;
  const auto piece = [&](int32_t id) { return id >= 0 ? json(tok.piece(id)) : json(nullptr); };
  return {{"default_generation_settings", {{"n_ctx", ctx.ctx_len()}, {"params", {{"n_predict", -1}}}}},
          {"total_slots", ctx.limits.max_in_flight},
          {"model_path", ctx.model_id},
          {"chat_template", ctx.chat_renderer->source()},
          {"bos_token", piece(tok.bos_id())},
          {"eos_token", piece(tok.eos_id())},
          {"modalities", {{"vision", false}, {"audio", false}}},
          {"infill", ctx.fim_tokens().has_value()},
          {"build_info", "preface"}};
}

json llama_slots(const ServerContext& ctx) {
  const engine::EngineCounters c = ctx.engine.counters();
  json out = json::array();
  for (int32_t i = 0; i < c.n_running + c.n_waiting; ++i) {
    out.push_back({{"id", i}, {"n_ctx", ctx.ctx_len()}, {"is_processing", i < c.n_running}});
  }
  return out;
}

}  // namespace preface::server
