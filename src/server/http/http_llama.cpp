// llama.cpp's own routes (server/api/llama_api.h): POST /completion, /completions and /infill, GET /props and
// /slots.
#include "server/api/llama_api.h"
#include "server/http/http_internal.h"

namespace preface::server {

void llama_completion(HttpState& state, ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  auto slot = acquire_slot(state, ctx);
  OpenAIRequest r = parse_llama_completion(parse_json_object(req.body), ctx);
  auto format = make_llama_format(ctx, r);
  serve_generation(state, ctx, req, res, std::move(slot), std::move(r.generation), std::move(format), r.stream);
}

void llama_infill(HttpState& state, ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  auto slot = acquire_slot(state, ctx);
  OpenAIRequest r = parse_llama_infill(parse_json_object(req.body), ctx);
  auto format = make_llama_format(ctx, r);
  serve_generation(state, ctx, req, res, std::move(slot), std::move(r.generation), std::move(format), r.stream);
}

void llama_props_route(HttpState&, ServerContext& ctx, const httplib::Request&, httplib::Response& res) {
  send_json(res, llama_props(ctx));
}

void llama_slots_route(HttpState&, ServerContext& ctx, const httplib::Request&, httplib::Response& res) {
  send_json(res, llama_slots(ctx));
}

}  // namespace preface::server
