// Ollama's API, for the `ollama` clients and the tools built on them: POST /api/chat and /api/generate
// (streamed as NDJSON by default, one JSON object per line; "stream": false for one object), GET /api/tags,
// /api/ps and /api/version, POST /api/show. Errors are {"error": "message"} (api_error.h's Ollama flavor).
//
// A request is read into the OpenAI shape and built by the chat or completions path (openai_api.h), so
// templates, tools, structured output and sampling behave as there:
//   messages (roles system/user/assistant/tool; assistant tool_calls [{function: {name, arguments: {...}}}], tool
//   results in order) or prompt (+ system; raw: true sends the prompt untemplated); tools; format ("json" or a
//   JSON Schema); think (the template's enable_thinking; reasoning comes back as message.thinking / thinking);
//   options: num_predict (-1, -2: up to the context), temperature, top_p, top_k, min_p, seed, stop,
//   repeat_penalty, presence_penalty, frequency_penalty. The load-time options (num_ctx, num_batch, num_gpu,
//   num_thread, main_gpu, use_mmap, use_mlock, numa, low_vram) and keep_alive are fixed by the server's command
//   line and accepted without effect; any other option is a 400 naming it. Images, suffix and context are 400.
#pragma once
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "server/api/openai_api.h"

namespace preface::server {

struct OllamaRequest {
  OpenAIRequest openai;  // the generation and how its output reads back as calls
  bool stream = true;    // Ollama streams unless told not to
  bool chat = true;      // /api/chat; false: /api/generate
  std::string model;     // the name the client asked for (echoed back)
};

// Throw ApiError (400 naming the field).
OllamaRequest parse_ollama_chat(const nlohmann::json& body, ServerContext& ctx);
OllamaRequest parse_ollama_generate(const nlohmann::json& body, ServerContext& ctx);

std::unique_ptr<ResponseFormat> make_ollama_format(ServerContext& ctx, const OllamaRequest& request);

// Now as Ollama writes times (RFC 3339, UTC, nanoseconds).
std::string ollama_time_now();

// GET /api/tags, /api/ps; POST /api/show.
nlohmann::json ollama_tags(const ServerContext& ctx);
nlohmann::json ollama_ps(const ServerContext& ctx);
nlohmann::json ollama_show(const ServerContext& ctx);

}  // namespace preface::server
