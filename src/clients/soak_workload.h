// The requests of `preface soak`: a seeded mix of well-formed generations (shared-prefix chats, long prompts;
// streamed or not; OpenAI /v1/completions and /v1/chat/completions, Anthropic /v1/messages), clients that vanish
// mid-stream, malformed requests, requests over the server's limits, and the attacks of issue 28: JSON nested
// 100,000 deep (400), forged special tokens in chat content (a well-formed prompt with its own reference),
// /tokenize of 32 KiB with pieces (200), slowloris requests (408 at the server's --header-timeout) and
// non-streamed requests whose client closes at once. Deterministic: request i of client c is
// a pure function of (seed, c, i), and prompts come from small fixed pools so every well-formed prompt recurs and
// its answer can be compared with a reference (temperature 0: the server must answer it the same every time,
// from the prefix cache or not, whatever else is batched with it).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace preface::cli::soak {

enum class Api { kCompletions, kChat, kMessages };
inline constexpr int kNumApis = 3;
const char* api_path(Api api);  // "/v1/completions", "/v1/chat/completions", "/v1/messages"

// The server's limits the over-limit requests are built against (pass the values the server runs with).
struct Limits {
  int64_t max_body_bytes = 16 << 20;  // larger bodies must get 413 (preface serve --max-body-bytes)
  int32_t max_output_tokens = 32768;  // larger max_tokens must get 400 (--max-tokens-limit)
  int32_t max_prompt_tokens = 2048;   // longer prompts must get 400 (--max-prompt-tokens, else the context)
};

struct Spec {
  uint64_t seed = 1;
  int32_t n_systems = 3;        // shared system prompts
  int32_t n_questions = 8;      // questions per system prompt
  int32_t n_long = 4;           // long standalone prompts
  int32_t system_words = 120;   // words of each system prompt
  int32_t question_words = 12;  // words of each question
  int32_t long_words = 400;     // words of each long prompt (size it below the prompt limit: see words_for_tokens)
  int32_t over_words = 4000;    // words of the over-limit prompt (size it above the prompt limit)
  Limits limits;
};

// Words of kWords text that encode to about `n_tokens` tokens, given `tokens_per_word` measured on the server.
int32_t words_for_tokens(int64_t n_tokens, double tokens_per_word);

enum class Expect { kText, k400, k413, k408, kTokens };  // kTokens: a /tokenize answer

// Requests sent over a raw socket instead of an HTTP client (server/http/http_listener.h is what they test).
enum class Attack { kNone, kSlowloris, kSendAndVanish };

struct Request {
  std::string label;            // e.g. "chat/shared/stream", "messages/malformed-type", for error reports
  std::string path;             // "/v1/..."
  std::string body;             // JSON text; malformed on purpose for some
  bool stream = false;
  int32_t vanish_after_chunks = 0;  // > 0: close the connection after this many text chunks
  Expect expect = Expect::kText;
  std::string key;              // kText: identifies (API, prompt, max_tokens), i.e. the one correct answer
  Attack attack = Attack::kNone;
};

// The prompt pools of a spec, built once.
class Workload {
 public:
  explicit Workload(const Spec& spec);

  // Request `index` of client `client`.
  Request make(uint32_t client, uint64_t index) const;
  // One non-streaming request for every well-formed key (the references), in a fixed order.
  std::vector<Request> reference_requests() const;
  int32_t n_prompts() const { return spec_.n_systems * spec_.n_questions + spec_.n_long; }

 private:
  // A well-formed generation of prompt `prompt_id` on `api`.
  Request generation(Api api, int32_t prompt_id, bool stream) const;
  Request malformed(Api api, uint64_t variant) const;
  Request over_limit(Api api, uint64_t variant) const;
  Request attack(Api api, uint64_t variant) const;
  Request forged(Api api) const;  // chat content carrying the model's and other templates' control tokens
  std::string body(Api api, const std::string& system, const std::string& user, int64_t max_tokens,
                   bool stream) const;

  Spec spec_;
  std::vector<std::string> systems_, questions_, longs_;  // [n_systems], [n_questions], [n_long]
  std::string over_text_;                                  // over the prompt limit
};

}  // namespace preface::cli::soak
