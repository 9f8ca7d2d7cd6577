// llama.cpp's own routes (server/api/llama_api.h): POST /completion, /completions and /infill, GET /props and
// /slots.
#include "server/api/llama_api.h"
#include "server/http/http_internal.h"

namespace preface::server {

namespace {

template <OpenAIRequest (*kParse)(const nlohmann::json&, ServerContext&)>
void llama_generate(HttpState& state, ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  auto slot = acquire_slot(state, ctx);
  OpenAIRequest r = kParse(parse_json_object(req.body), ctx);
  auto format = make_llama_format(ctx, r);
  serve_generation(state, ctx, req, res, std::move(slot), std::move(r.generation), std::move(format), r.stream);
}

}  // namespace

void llama_completion(HttpState& state, ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  llama_generate<parse_llama_completion>(state, ctx, req, res);
}

void llama_infill(HttpState& state, ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  llama_generate<parse_llama_infill>(state, ctx, req, res);
}

void llama_props_route(HttpState&, ServerContext& ctx, const httplib::Request&, httplib::Response& res) {
  send_json(res, llama_props(ctx));
}

void llama_slots_route(HttpState&, ServerContext& ctx, const httplib::Request&, httplib::Response& res) {
  send_json(res, llama_slots(ctx));
}

}  // namespace preface::server
