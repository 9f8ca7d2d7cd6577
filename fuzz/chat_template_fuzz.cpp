// Fuzz target: chat template recognition on arbitrary template text, and rendering of arbitrary conversations
// (roles, contents, BOS/EOS texts) in every family, then their tokenization under the BOS contract.
// Only preface::Error may escape render_chat (unknown role, bad role order). Checks, from chat_template.h:
//   - recognize/detect agree and never throw; every family name maps back to its family;
//   - py_strip returns a sub-view of its input and is idempotent;
//   - prefix stability (A) and (B) for every family and conversation they are documented to hold for;
//   - encode_chat_prompt yields exactly one leading BOS and ids inside the vocab.
#include <fuzzer/FuzzedDataProvider.h>

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "support.h"
#include "util/error.h"

namespace preface::fuzz {
namespace {

using chat::ChatMessage;
using chat::ChatTemplate;

constexpr int kNumFamilies = 14;  // ChatTemplate::ChatML .. ChatTemplate::Zephyr

// Loaded once (libFuzzer calls the target many times in one process); immutable afterwards.
const Tokenizer& spm_vocab() {
  static const std::unique_ptr<Tokenizer> tok = load_shared_vocab("ggml-vocab-llama-spm.gguf");
  return *tok;
}

// Strings the templates and tokenizers react to, so that short inputs reach them.
constexpr std::array<const char*, 16> kMarkers = {
    "<|im_start|>", "<|im_end|>", "[INST]", "<<SYS>>", "<start_of_turn>", "<|start_header_id|>",
    "<|end_header_id|>", "<|assistant|>", "<|end|>", "<|user|>", "</s>", "<s>", "[SYSTEM_PROMPT]",
    "Cutting Knowledge Date", "' [INST] ' + system_message", "[AVAILABLE_TOOLS]"};

std::string fuzz_text(FuzzedDataProvider& in, size_t max_bytes) {
  std::string s = in.ConsumeRandomLengthString(max_bytes);
  if (in.ConsumeBool()) s += kMarkers[in.ConsumeIntegralInRange<size_t>(0, kMarkers.size() - 1)];
  if (in.ConsumeBool()) s += in.ConsumeRandomLengthString(max_bytes);
  return s;
}

std::string fuzz_role(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange(0, 7)) {
    case 0: case 1: return "user";
    case 2: case 3: return "assistant";
    case 4: case 5: return "system";
    default: return in.ConsumeRandomLengthString(12);
  }
}

void check_recognize(std::string_view src) {
  const std::optional<ChatTemplate> t = chat::recognize_chat_template(src);
  check(chat::detect_chat_template(src) == t.value_or(ChatTemplate::ChatML), "detect differs from recognize");
}

void check_strip(std::string_view text) {
  const std::string_view s = chat::py_strip(text);
  check(s.data() >= text.data() && s.data() + s.size() <= text.data() + text.size(), "py_strip left its input");
  check(chat::py_strip(s) == s, "py_strip is not idempotent");
}

std::optional<std::string> try_render(ChatTemplate t, const std::vector<ChatMessage>& m, bool agp,
                                      std::string_view bos, std::string_view eos) {
  try {
    return chat::render_chat(t, m, agp, bos, eos);
  } catch (const Error&) {
    return std::nullopt;
  }
}

// The conversation, escaped, for failure messages.
std::string describe(const std::vector<ChatMessage>& m, std::string_view bos, std::string_view eos) {
  std::string out = "bos='" + escaped(bos) + "' eos='" + escaped(eos) + "'";
  for (const ChatMessage& msg : m) out += "\n  " + escaped(msg.role) + ": '" + escaped(msg.content) + "'";
  return out;
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

// Properties (A) and (B) of chat_template.h over the prefixes of `m`, where they are documented to hold.
void check_prefix_stability(ChatTemplate t, const std::vector<ChatMessage>& m, std::string_view bos,
                            std::string_view eos) {
  const bool has_system = !m.empty() && m[0].role == "system";
  const bool moving_system = (t == ChatTemplate::MistralV3 || t == ChatTemplate::MistralV3Tekken) && has_system;
  if (moving_system) return;
  const std::string name = chat::chat_template_name(t);
  for (size_t k = 1; k < m.size(); ++k) {
    const std::vector<ChatMessage> pk(m.begin(), m.begin() + static_cast<ptrdiff_t>(k));
    const std::vector<ChatMessage> pk1(m.begin(), m.begin() + static_cast<ptrdiff_t>(k + 1));
    if (t != ChatTemplate::Phi3) {
      const auto a = try_render(t, pk, false, bos, eos);
      for (const bool agp : {false, true}) {
        const auto b = try_render(t, pk1, agp, bos, eos);
        if (a && b) {
          check(starts_with(*b, *a), name + ": (A) fails at k=" + std::to_string(k) + " for " + describe(m, bos, eos));
        }
      }
    }
    // (B): P(k) ends in a user turn; P(k+2) adds the assistant's reply and the next user turn.
    if (k + 2 <= m.size() && m[k - 1].role == "user" && m[k].role == "assistant" && m[k + 1].role == "user") {
      const std::vector<ChatMessage> pk2(m.begin(), m.begin() + static_cast<ptrdiff_t>(k + 2));
      const auto a = try_render(t, pk, true, bos, eos);
      const auto b = try_render(t, pk2, true, bos, eos);
      if (a && b) {
        check(starts_with(*b, *a), name + ": (B) fails at k=" + std::to_string(k) + " for " + describe(m, bos, eos));
      }
    }
  }
}

// The BOS contract: exactly one leading BOS (the SPM vocab adds BOS by default), every id inside the vocab.
void check_tokens(ChatTemplate t, const std::vector<ChatMessage>& m, bool agp) {
  const Tokenizer& tok = spm_vocab();
  std::vector<int32_t> ids;
  try {
    ids = chat::render_chat_tokens(tok, t, m, agp);
  } catch (const Error&) {
    return;
  }
  for (const int32_t id : ids) check(id >= 0 && id < tok.n_vocab(), "chat prompt id outside the vocab");
  check(!ids.empty() && ids[0] == tok.bos_id(), "chat prompt does not start with BOS");
  check(ids.size() < 2 || ids[1] != tok.bos_id(), "chat prompt starts with two BOS");
}

}  // namespace
}  // namespace preface::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  preface::fuzz::spm_vocab();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace preface;
  using namespace preface::fuzz;
  FuzzedDataProvider in(data, size);
  for (int k = 0; k < kNumFamilies; ++k) {
    const auto t = static_cast<chat::ChatTemplate>(k);
    check(chat::chat_template_from_name(chat::chat_template_name(t)) == t, "family name does not map back");
  }
  const std::string src = fuzz_text(in, 256);
  check_recognize(src);
  check_strip(src);

  const auto t = static_cast<chat::ChatTemplate>(in.ConsumeIntegralInRange(0, kNumFamilies - 1));
  const bool agp = in.ConsumeBool();
  const std::array<std::string, 4> ends = {"", "<s>", "</s>", "<|begin_of_text|>"};
  const std::string bos = in.ConsumeBool() ? ends[in.ConsumeIntegralInRange<size_t>(0, 3)] : fuzz_text(in, 8);
  const std::string eos = in.ConsumeBool() ? ends[in.ConsumeIntegralInRange<size_t>(0, 3)] : fuzz_text(in, 8);
  std::vector<chat::ChatMessage> messages(in.ConsumeIntegralInRange<size_t>(0, 6));
  for (chat::ChatMessage& m : messages) {
    m.role = fuzz_role(in);
    m.content = fuzz_text(in, 64);
    check_strip(m.content);
  }

  try {
    (void)chat::render_chat(t, messages, agp, bos, eos);
  } catch (const Error&) {
  }
  check_prefix_stability(t, messages, bos, eos);
  check_tokens(t, messages, agp);
  return 0;
}
