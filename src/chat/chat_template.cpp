// Chat template names, family detection from Jinja sources, and the BOS-safe tokenization of a rendered
// prompt. The renderers are in chat_render.cpp.
#include "chat/chat_template.h"

#include <array>
#include <utility>

namespace preface::chat {
namespace {

struct NamedTemplate {
  std::string_view name;
  ChatTemplate tmpl;
};

// Canonical names first (one per family, in enum order), then aliases.
constexpr std::array<NamedTemplate, 17> kNames = {{
    {"chatml", ChatTemplate::ChatML},
    {"qwen2", ChatTemplate::Qwen2},
    {"qwen2.5", ChatTemplate::Qwen25},
    {"llama2", ChatTemplate::Llama2},
    {"llama3", ChatTemplate::Llama3},
    {"llama3.1", ChatTemplate::Llama31},
    {"mistral-legacy", ChatTemplate::MistralLegacy},
    {"mistral-v1", ChatTemplate::MistralV1},
    {"mistral-v3", ChatTemplate::MistralV3},
    {"mistral-v3-tekken", ChatTemplate::MistralV3Tekken},
    {"mistral-v7", ChatTemplate::MistralV7},
    {"gemma", ChatTemplate::Gemma},
    {"phi3", ChatTemplate::Phi3},
    {"zephyr", ChatTemplate::Zephyr},
    {"llama2-sys", ChatTemplate::Llama2},
    {"llama2-sys-bos", ChatTemplate::Llama2},
    {"llama2-sys-strip", ChatTemplate::Llama2},
}};
constexpr size_t kNumFamilies = 14;

bool contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

// Templates containing [INST] (Llama-2 and Mistral). The markers are those llama.cpp keys on.
ChatTemplate recognize_inst(std::string_view src) {
  if (contains(src, "[SYSTEM_PROMPT]")) return ChatTemplate::MistralV7;
  // The official Mistral 'v1' template prepends the system message with "' [INST] ' + system_message"; the
  // 'v3' templates carry the [AVAILABLE_TOOLS] block and open turns with "[INST] " (v3) or "[INST]" (tekken).
  if (contains(src, "' [INST] ' + system_message") || contains(src, "[AVAILABLE_TOOLS]")) {
    if (contains(src, " [INST]")) return ChatTemplate::MistralV1;
    if (contains(src, "\"[INST]\"") || contains(src, "'[INST]'")) return ChatTemplate::MistralV3Tekken;
    return ChatTemplate::MistralV3;
  }
  if (contains(src, "<<SYS>>")) return ChatTemplate::Llama2;
  return ChatTemplate::MistralLegacy;
}

}  // namespace

std::optional<ChatTemplate> chat_template_from_name(std::string_view name) {
  for (const NamedTemplate& n : kNames) {
    if (n.name == name) return n.tmpl;
  }
  return std::nullopt;
}

const char* chat_template_name(ChatTemplate t) {
  for (size_t i = 0; i < kNumFamilies; ++i) {
    if (kNames[i].tmpl == t) return kNames[i].name.data();  // literals: NUL-terminated
  }
  return "unknown";
}

std::string chat_template_names() {
  std::string out;
  for (size_t i = 0; i < kNumFamilies; ++i) {
    if (i > 0) out += ", ";
    out += kNames[i].name;
  }
  return out;
}

std::optional<ChatTemplate> recognize_chat_template(std::string_view src) {
  if (src.empty()) return std::nullopt;
  if (auto named = chat_template_from_name(src)) return named;
  if (contains(src, "<|im_start|>")) {
    // Phi-4 ("<|im_sep|>") and SmolVLM ("<end_of_utterance>") reuse the token but are not ChatML.
    if (contains(src, "<|im_sep|>") || contains(src, "<end_of_utterance>")) return std::nullopt;
    if (contains(src, "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.")) {
      return ChatTemplate::Qwen25;
    }
    // Qwen2's default system turn, with the newline as a Jinja escape or a literal newline.
    if (contains(src, "<|im_start|>system\\nYou are a helpful assistant.<|im_end|>") ||
        contains(src, "<|im_start|>system\nYou are a helpful assistant.<|im_end|>")) {
      return ChatTemplate::Qwen2;
    }
    return ChatTemplate::ChatML;
  }
  if (contains(src, "[INST]")) return recognize_inst(src);
  if (contains(src, "<|assistant|>") && contains(src, "<|end|>")) return ChatTemplate::Phi3;
  // Zephyr ends turns with eos_token (zephyr-7b-beta) or a literal EOS (stablelm-zephyr: <|endoftext|>).
  // ChatGLM ("[gMASK]") and GLM-Edge share the role tags but end no turn with EOS.
  if (contains(src, "<|user|>") && !contains(src, "[gMASK]") &&
      ((contains(src, "<|assistant|>") && (contains(src, "eos_token") || contains(src, "</s>"))) ||
       contains(src, "<|endoftext|>"))) {
    return ChatTemplate::Zephyr;
  }
  if (contains(src, "<start_of_turn>")) return ChatTemplate::Gemma;
  if (contains(src, "<|start_header_id|>") && contains(src, "<|end_header_id|>")) {
    return contains(src, "Cutting Knowledge Date") ? ChatTemplate::Llama31 : ChatTemplate::Llama3;
  }
  return std::nullopt;
}

ChatTemplate detect_chat_template(std::string_view src) {
  return recognize_chat_template(src).value_or(ChatTemplate::ChatML);
}

std::string chat_bos_text(const Tokenizer& tok) {
  return tok.bos_id() >= 0 ? tok.piece(tok.bos_id()) : std::string();
}

std::string chat_eos_text(const Tokenizer& tok) {
  return tok.eos_id() >= 0 ? tok.piece(tok.eos_id()) : std::string();
}

std::vector<int32_t> encode_chat_prompt(const Tokenizer& tok, const RenderedChat& rendered) {
  const std::string bos = chat_bos_text(tok);
  std::string_view text = rendered.text;
  size_t cut = 0;
  bool add_bos = tok.add_bos_default();
  // A leading BOS the template wrote is the tokenizer's own (it is template text, never a content span).
  if (!bos.empty() && text.substr(0, bos.size()) == bos &&
      (rendered.content.empty() || rendered.content.front().offset >= bos.size())) {
    cut = bos.size();
    add_bos = true;
  }
  std::vector<TextSpan> plain;
  plain.reserve(rendered.content.size());
  for (const TextSpan& s : rendered.content) plain.push_back({s.offset - cut, s.length});
  return tok.encode(text.substr(cut), add_bos, /*parse_special=*/true, plain);
}

std::vector<int32_t> encode_chat_prompt(const Tokenizer& tok, std::string_view rendered) {
  RenderedChat r;
  r += rendered;
  return encode_chat_prompt(tok, r);
}

std::vector<int32_t> render_chat_tokens(const Tokenizer& tok, ChatTemplate t,
                                        const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  return encode_chat_prompt(
      tok, render_chat_spans(t, messages, add_generation_prompt, chat_bos_text(tok), chat_eos_text(tok)));
}

}  // namespace preface::chat
