// The Responses API's routes (server/api/responses_api.h): POST /v1/responses, GET and DELETE
// /v1/responses/{id}, GET /v1/responses/{id}/input_items. Stored responses are the caller's tenant's only.
#include <exception>
#include <string>

#include "server/api/responses_api.h"
#include "server/http/auth.h"
#include "server/http/http_internal.h"

namespace preface::server {
namespace {

using nlohmann::json;

// The stored response GET/DELETE/input_items name (req.matches[1]), of the caller's tenant only.
std::shared_ptr<const StoredResponse> stored_response(HttpState& state, ServerContext& ctx,
                                                      const httplib::Request& req) {
  const std::string id = req.matches.size() > 1 ? req.matches[1].str() : "";
  auto r = ctx.responses.get(authenticate(state.options, req), id);
  if (!r) throw ApiError(404, "no stored response '" + id + "' (unknown, expired or deleted)", "response_id");
  return r;
}

}  // namespace

// POST /v1/responses (server/api/responses_api.h).
void responses_create(HttpState& state, ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  auto slot = acquire_slot(state, ctx);
  const std::string tenant = authenticate(state.options, req);
  std::unique_ptr<ResponseFormat> format;
  ResponsesRequest r;
  {
    const json body = parse_json_object(req.body);
    r = parse_responses_request(body, ctx, tenant);
    format = make_responses_format(ctx, r, tenant);
  }
  serve_generation(state, ctx, req, res, std::move(slot), std::move(r.chat.generation), std::move(format), r.stream);
}

void responses_get(HttpState& state, ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  send_json(res, stored_response(state, ctx, req)->response);
}

void responses_delete(HttpState& state, ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const std::string id = stored_response(state, ctx, req)->id;
  ctx.responses.erase(authenticate(state.options, req), id);
  send_json(res, {{"id", id}, {"object", "response"}, {"deleted", true}});
}

void responses_input_items(HttpState& state, ServerContext& ctx, const httplib::Request& req,
                           httplib::Response& res) {
  const auto r = stored_response(state, ctx, req);
  const std::string order = req.has_param("order") ? req.get_param_value("order") : "desc";
  if (order != "asc" && order != "desc") throw ApiError(400, "order: must be 'asc' or 'desc'", "order");
  int64_t limit = 20;
  if (req.has_param("limit")) {
    try {
      limit = std::stoll(req.get_param_value("limit"));
    } catch (const std::exception&) {
      limit = 0;
    }
    if (limit < 1 || limit > 100) throw ApiError(400, "limit: must be an integer in [1, 100]", "limit");
  }
  send_json(res, input_items_list(*r, order, limit, req.has_param("after") ? req.get_param_value("after") : ""));
}

}  // namespace preface::server
