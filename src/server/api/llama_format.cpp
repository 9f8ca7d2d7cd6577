// llama.cpp's /completion response objects (server/api/llama_api.h).
#include "server/api/llama_api.h"

namespace preface::server {
namespace {

using nlohmann::json;

class LlamaFormat : public ResponseFormat {
 public:
  LlamaFormat(ServerContext& ctx, const OpenAIRequest&) : id_(ctx.new_id("cmpl-")), model_(ctx.model_id) {}

  std::string stream_start(int32_t) override { return {}; }

  std::string stream_delta(const GenerationDelta& d) override {
    if (d.text.empty()) return {};
    return event({{"content", d.text}, {"stop", false}, {"id_slot", 0}, {"index", 0}});
  }

  std::string stream_end(const GenerationSummary& s) override {
    if (s.kind == StopKind::Error || s.kind == StopKind::Cancelled) {
      return event({{"error", {{"code", 500}, {"message", s.kind == StopKind::Cancelled ? "the server is shutting down"
                                                                                       : s.error}}}});
    }
    json last = {{"content", ""}, {"index", 0}};
    add_final(last, s);
    return event(last);
  }

  json full_response(const std::string& text, const std::string&, const std::vector<ChannelCall>&,
                     const std::vector<TokenLogprob>&, const GenerationSummary& s) override {
    json out = {{"content", text}, {"index", 0}};
    add_final(out, s);
    merge_extra_fields(out);
    return out;
  }

  const std::string& id() const override { return id_; }

 private:
  static std::string event(const json& j) { return "data: " + dump_json(j) + "\n\n"; }

  void add_final(json& out, const GenerationSummary& s) const {
    const engine::RequestStats& st = s.stats;
    const char* stop_type = s.kind == StopKind::EndOfGeneration ? "eos"
                            : s.kind == StopKind::StopString    ? "word"
                            : s.kind == StopKind::Length        ? "limit"
                                                                : "none";
    const auto per = [](double ms, int32_t n) { return n > 0 ? ms / n : 0.0; };
    const auto rate = [](double ms, int32_t n) { return ms > 0 ? 1e3 * n / ms : 0.0; };
    const int32_t n_prompt = st.n_prompt_tokens - st.n_cached_tokens;  // evaluated, not read from the cache
    out["id_slot"] = 0;
    out["stop"] = true;
    out["model"] = model_;
    out["tokens_predicted"] = s.n_completion_tokens;
    out["tokens_evaluated"] = st.n_prompt_tokens;
    out["tokens_cached"] = st.n_cached_tokens;
    out["truncated"] = false;
    out["stop_type"] = stop_type;
    out["stopping_word"] = s.kind == StopKind::StopString ? s.stop_string : "";
    out["timings"] = {{"cache_n", st.n_cached_tokens},
                      {"prompt_n", n_prompt},
                      {"prompt_ms", st.prefill_ms},
                      {"prompt_per_token_ms", per(st.prefill_ms, n_prompt)},
                      {"prompt_per_second", rate(st.prefill_ms, n_prompt)},
                      {"predicted_n", s.n_completion_tokens},
                      {"predicted_ms", st.decode_ms},
                      {"predicted_per_token_ms", per(st.decode_ms, s.n_completion_tokens)},
                      {"predicted_per_second", rate(st.decode_ms, s.n_completion_tokens)}};
  }

  std::string id_;
  std::string model_;
};

}  // namespace

std::unique_ptr<ResponseFormat> make_llama_format(ServerContext& ctx, const OpenAIRequest& request) {
  return std::make_unique<LlamaFormat>(ctx, request);
}

}  // namespace preface::server
