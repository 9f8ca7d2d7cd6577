// OpenAI's Responses API (POST /v1/responses; GET/DELETE /v1/responses/{id}; GET /v1/responses/{id}/input_items).
//
// A request is read into the chat-completions shape and built by the chat path (openai_api.h), so tools, tool
// choice, structured output, reasoning effort and sampling behave exactly as there:
//   input (a string, or items: messages with input_text/output_text parts, function_call, function_call_output;
//   reasoning items are accepted and not rendered) -> messages; instructions -> a system message first;
//   tools [{type: function, name, description, parameters, strict}] and tool_choice ("auto" | "none" |
//   "required" | {type: function, name}); text.format ({type: text | json_object | json_schema, name, schema,
//   strict}) -> response_format; reasoning.effort -> reasoning_effort; max_output_tokens -> max_tokens;
//   temperature, top_p, parallel_tool_calls, metadata (echoed), user, store (default true), stream; and the chat
//   path's extensions as they are (top_k, min_p, penalties, stop, seed, cache_salt, grammar, guided_*, ...).
// Errors name the Responses field (input, text.format.schema..., tools[i].parameters...).
//
// previous_response_id continues a stored response of the same tenant (404 for any other id): its
// conversation, then this request's input. Instructions are not carried over (as OpenAI's). When this
// request's instructions, tools and template arguments equal the previous one's and the template renders the
// earlier turns as a prefix of the new conversation, the prompt is the previous response's own token ids
// (prompt, reply, and the end-of-generation token when the template writes it there) followed by the new turns'
// tokens: nothing before is re-rendered or re-tokenized, so all of it is a prefix hit. Otherwise the whole
// conversation is rendered again (the prefix cache still serves what matches), and the response says so in
// `preface.resumed: false`.
#pragma once
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "server/api/openai_api.h"
#include "server/api/response_store.h"

namespace preface::server {

struct ResponsesRequest {
  OpenAIRequest chat;                       // the generation and how its output reads back as calls
  bool stream = false;
  bool store = true;
  bool resumed = false;                     // the prompt continues the previous response's token ids
  nlohmann::json echo;                      // request fields the response object repeats
  nlohmann::json input_items;               // this request's input as items, with ids
  // What a stored response keeps: filled here but for the reply (the format adds it when the reply ends).
  std::shared_ptr<StoredResponse> pending;
};

// Throws ApiError (400 naming the field; 404 for an unknown previous_response_id).
ResponsesRequest parse_responses_request(const nlohmann::json& body, ServerContext& ctx, const std::string& tenant);

// The response object and its stream events (response.created ... response.completed); stores the response
// under `tenant` when it ends if the request asked for it.
std::unique_ptr<ResponseFormat> make_responses_format(ServerContext& ctx, ResponsesRequest& request,
                                                      const std::string& tenant);

// GET /v1/responses/{id}/input_items: {"object": "list", "data", "first_id", "last_id", "has_more"}, the items
// the response's request gave (`order` "asc" or "desc", at most `limit`, after the item `after`).
nlohmann::json input_items_list(const StoredResponse& r, const std::string& order, int64_t limit,
                                const std::string& after);

}  // namespace preface::server
