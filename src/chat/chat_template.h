// Built-in chat template families for /v1/chat/completions and /v1/messages. A model's Jinja template runs as
// Jinja (chat_jinja.h, chosen by chat_renderer.h); these families are the fallback when a file has no template
// and what --chat-template NAME selects. The FAMILY of a Jinja source is recognised by substring heuristics (as
// llama.cpp's llm_chat_detect_template) and rendered in C++, character for character as the model's own Jinja
// template renders it under Hugging Face transformers (jinja2 with trim_blocks and lstrip_blocks), for
// messages whose content is plain text. Where a template has no answer (a system message in a template that
// raises on one) the polyfill is documented per family below.
//
// Families (name accepted by --chat-template; the reference template each follows):
//   chatml            <|im_start|>ROLE\nCONTENT<|im_end|>\n ..., generation prompt <|im_start|>assistant\n.
//                     Also the fallback for an empty or unrecognised template (as llama.cpp).
//   qwen2             Qwen2-7B-Instruct: chatml, plus "<|im_start|>system\nYou are a helpful
//                     assistant.<|im_end|>\n" first when messages[0] is not a system message.
//   qwen2.5           Qwen2.5-*-Instruct (no tools): chatml with the default system message "You are Qwen,
//                     created by Alibaba Cloud. You are a helpful assistant."
//   llama2            Llama-2-7b-chat-hf: BOS "[INST] " (<<SYS>>\nSYSTEM\n<</SYS>>\n\n in the first turn)
//                     USER.strip() " [/INST]", assistant " " CONTENT.strip() " " EOS; BOS before EVERY user
//                     turn. Every "[INST]" template with "<<SYS>>" (llama.cpp's llama2-sys* variants) maps here.
//   llama3            Meta-Llama-3-8B-Instruct: BOS before the first header; contents trimmed.
//   llama3.1          Llama-3.1/3.2/3.3-Instruct (no tools): a system header is always emitted, holding
//                     "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n" and the trimmed
//                     system message. The date is the template's fixed fallback; templates that call
//                     strftime_now (3.2) render today's date under transformers, preface keeps the fixed one
//                     so a prompt renders the same every day.
//   mistral-legacy    Early Mistral/Mixtral-Instruct: BOS "[INST] " USER " [/INST]" ASSISTANT EOS. The
//                     template rejects system messages; preface puts SYSTEM "\n\n" before the first user turn.
//   mistral-v1        Mistral-7B-Instruct-v0.1/v0.2, Mixtral-8x7B-Instruct (current): BOS, " [INST] " USER
//                     " [/INST]", assistant " " CONTENT EOS; the system message opens the first user turn.
//   mistral-v3        Mistral-7B-Instruct-v0.3: "[INST] " USER "[/INST]", assistant " " CONTENT|trim EOS; the
//                     system message goes into the LAST user turn (and is dropped when the last is not user).
//   mistral-v3-tekken Mistral-Nemo: as mistral-v3 without the spaces and without trimming.
//   mistral-v7        Mistral-Large-2411: "[SYSTEM_PROMPT] S[/SYSTEM_PROMPT]", "[INST] U[/INST]", " A" EOS.
//   gemma             gemma-2-9b-it / gemma-3: BOS, <start_of_turn>user|model\nCONTENT|trim<end_of_turn>\n.
//                     A leading system message becomes SYSTEM "\n\n" at the start of the first user turn (what
//                     Gemma 3's template does; Gemma 1/2's templates raise on it).
//   phi3              Phi-3-mini-4k-instruct (current): <|ROLE|>\nCONTENT<|end|>\n, generation prompt
//                     <|assistant|>\n, and EOS at the end when add_generation_prompt is false. (The April-2024
//                     template, "{{ bos_token }}..." without a system role, tokenizes the same for a prompt
//                     ending in a user turn, except that it silently drops system messages, which preface
//                     renders.)
//   zephyr            zephyr-7b-beta: <|ROLE|>\nCONTENT EOS "\n", generation prompt <|assistant|>\n.
//
// Messages: roles "system", "user", "assistant". Any other role (including "tool") is a preface::Error.
// Templates that alternate turns (llama2, mistral-*, except v7, and gemma) accept a system message only
// first and then require user/assistant/user/...; a violation is a preface::Error quoting the template.
//
// Prefix stability (what prompt caching relies on). For a conversation m and P(k) = its first k messages:
//  (A) render(P(k), agp=false) is a prefix of render(P(k+1), agp=false or true), and
//  (B) when m[k-1] is a user turn, render(P(k), agp=true) is a prefix of render(P(k+2), agp=true) (one
//      turn's prompt is a prefix of the next turn's prompt once the reply and a new user turn are appended).
//  Both hold for every family except:
//    mistral-v3, mistral-v3-tekken with a system message: it moves to the last user turn, so (A) and (B)
//      fail and each turn shares only BOS "[INST]" with the previous one;
//    phi3: (A) fails (EOS is appended when add_generation_prompt is false); (B) holds.
//  Text prefixes become token prefixes up to the last special token before the split point (special tokens
//  cut the text into independently tokenized pieces); at most the final few tokens may differ.
//
// BOS contract. render_chat() returns exactly what the Jinja template produces with bos_token = bos_text and
// eos_token = eos_text, so templates that write bos_token at the start (llama2, llama3, llama3.1, mistral-*,
// gemma) begin with bos_text, and llama2 repeats it inside the history. Never tokenize that string with
// add_bos=true directly; use encode_chat_prompt(), which yields exactly one leading BOS:
//   - rendered starts with the tokenizer's BOS piece: that piece is removed and the rest encoded with
//     add_bos=true (same ids as parsing the piece, one BOS);
//   - otherwise: encoded with add_bos = tok.add_bos_default() (as llama.cpp's server; transformers'
//     apply_chat_template(tokenize=True) would add no BOS for templates without bos_token, e.g. zephyr);
//   - always parse_special=true, so "<|im_start|>", "</s><s>" inside the text become their control ids. Like
//     llama.cpp and transformers, special-token text inside message contents is parsed too.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace preface::chat {

struct ChatMessage {
  std::string role;     // "system", "user" or "assistant"
  std::string content;  // plain text (UTF-8)
};

enum class ChatTemplate {
  ChatML,
  Qwen2,
  Qwen25,
  Llama2,
  Llama3,
  Llama31,
  MistralLegacy,
  MistralV1,
  MistralV3,
  MistralV3Tekken,
  MistralV7,
  Gemma,
  Phi3,
  Zephyr,
};

// The --chat-template names above; also llama.cpp's aliases "llama2-sys", "llama2-sys-bos",
// "llama2-sys-strip" (-> llama2). nullopt for anything else.
std::optional<ChatTemplate> chat_template_from_name(std::string_view name);
const char* chat_template_name(ChatTemplate t);
// "chatml, qwen2, ..." for help texts and error messages.
std::string chat_template_names();

// The family of a Jinja chat template source (or of a bare family name stored in its place, as llama.cpp
// accepts); nullopt when it is empty or not recognised.
std::optional<ChatTemplate> recognize_chat_template(std::string_view jinja_source);
// recognize_chat_template(), falling back to ChatML when empty or unrecognised.
ChatTemplate detect_chat_template(std::string_view jinja_source);

// A rendered conversation: the text, and where the callers' message content sits in it. Guarantee: tokenized by
// encode_chat_prompt(), content never produces a control token (a "</s>" or "<|im_end|>" typed in a message
// stays text), so a user cannot forge turns; the template's own text keeps its control tokens.
struct RenderedChat {
  std::string text;
  std::vector<TextSpan> content;  // [n] byte ranges of `text` that came from messages, ascending

  RenderedChat& operator+=(std::string_view s) {
    text += s;
    return *this;
  }
  void add_content(std::string_view s) {
    if (!s.empty()) content.push_back({text.size(), s.size()});
    text += s;
  }
};

// Renders `messages` (non-empty) as template `t` would. add_generation_prompt appends the opening of an
// assistant turn where the template has one. bos_text/eos_text: the tokenizer's BOS/EOS piece strings ("<s>",
// "<|begin_of_text|>", ...), possibly empty. Throws preface::Error on an empty list, an unknown role or a role
// order the template rejects.
std::string render_chat(ChatTemplate t, const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                        std::string_view bos_text, std::string_view eos_text);
// The same render with its content spans.
RenderedChat render_chat_spans(ChatTemplate t, const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                               std::string_view bos_text, std::string_view eos_text);

// The BOS/EOS piece strings of `tok` ("" when it has none), to pass to render_chat().
std::string chat_bos_text(const Tokenizer& tok);
std::string chat_eos_text(const Tokenizer& tok);

// Tokenizes a render under the BOS contract above, control tokens parsed outside its content spans only. The
// string overload treats all of `rendered` as template text.
std::vector<int32_t> encode_chat_prompt(const Tokenizer& tok, const RenderedChat& rendered);
std::vector<int32_t> encode_chat_prompt(const Tokenizer& tok, std::string_view rendered);

// Python's str.strip() (what Jinja's `trim` filter and `.strip()` do): removes leading and trailing code points
// for which str.isspace() is true (ASCII whitespace, U+001C..U+001F, U+0085, U+00A0, U+1680, U+2000..U+200A,
// U+2028, U+2029, U+202F, U+205F, U+3000). Invalid UTF-8 counts as non-space.
std::string_view py_strip(std::string_view text);

// render_chat() with tok's BOS/EOS texts, then encode_chat_prompt().
std::vector<int32_t> render_chat_tokens(const Tokenizer& tok, ChatTemplate t,
                                        const std::vector<ChatMessage>& messages, bool add_generation_prompt);

}  // namespace preface::chat
