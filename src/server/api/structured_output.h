// The structured-output fields of both APIs, compiled (on the calling HTTP thread: parsing only, never token
// masks) into one engine constraint. At most one field may constrain a request; a malformed or unsatisfiable one
// is a 400 naming it, down to the schema keyword (e.g. `response_format.json_schema.schema.properties.x.type:
// unknown type 'strng'`). A keyword the grammar cannot enforce is dropped and named in GenerationRequest::warnings
// (`response_format.json_schema.schema.properties.n: 'multipleOf' is not enforced`; docs/structured-output.md).
//
// OpenAI-shaped bodies (chat and completions):
//   response_format  {"type":"text"} | {"type":"json_object"} (llama.cpp: with an optional "schema") |
//                    {"type":"json_schema","json_schema":{"name","schema","strict","description"}}
//   grammar          GBNF text (llama.cpp)            json_schema     a schema (llama.cpp)
//   guided_json      a schema or its JSON text (vLLM) guided_grammar  GBNF text (vLLM)
//   guided_choice    an array of strings (vLLM)       structured_outputs {json | grammar | choice | json_object}
// Anthropic: output_config.format or output_format, {"type":"json_schema","schema":{...}}.
#pragma once
#include <nlohmann/json.hpp>

#include "server/api/api_error.h"
#include "server/api/context.h"
#include "server/api/generation.h"

namespace preface::server {

// Sets request.params.constraint (and constraint_strip_space from request.text_start, which must be set).
void apply_openai_structured_output(const JsonFields& f, const nlohmann::json& body, ServerContext& ctx,
                                    GenerationRequest& request);
void apply_anthropic_structured_output(const JsonFields& f, ServerContext& ctx, GenerationRequest& request);

}  // namespace preface::server
