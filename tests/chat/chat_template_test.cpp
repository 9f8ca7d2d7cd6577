// Rendering of every chat template family against hand-written expectations taken from the reference Jinja
// templates (and llama.cpp's tests/test-chat-template.cpp, whose conversation is reused here), the prefix
// stability properties documented in chat_template.h, and rejection of bad message lists.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "util/error.h"

namespace preface::chat {
namespace {

const std::vector<ChatMessage> kConversation = {
    {"system", "You are a helpful assistant"},
    {"user", "Hello"},
    {"assistant", "Hi there"},
    {"user", "Who are you"},
    {"assistant", "   I am an assistant   "},
    {"user", "Another question"},
};

struct Expected {
  ChatTemplate tmpl;
  const char* bos;
  const char* eos;
  const char* text;  // kConversation rendered with add_generation_prompt=true
};

// clang-format off
const Expected kExpected[] = {
  {ChatTemplate::ChatML, "", "<|im_end|>",
   "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
   "<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nWho are you<|im_end|>\n"
   "<|im_start|>assistant\n   I am an assistant   <|im_end|>\n<|im_start|>user\nAnother question<|im_end|>\n"
   "<|im_start|>assistant\n"},
  // A system message is present, so Qwen's default one is not added.
  {ChatTemplate::Qwen2, "", "<|im_end|>",
   "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
   "<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nWho are you<|im_end|>\n"
   "<|im_start|>assistant\n   I am an assistant   <|im_end|>\n<|im_start|>user\nAnother question<|im_end|>\n"
   "<|im_start|>assistant\n"},
  {ChatTemplate::Llama2, "<s>", "</s>",
   "<s>[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST] Hi there </s>"
   "<s>[INST] Who are you [/INST] I am an assistant </s><s>[INST] Another question [/INST]"},
  {ChatTemplate::Llama3, "<|begin_of_text|>", "<|eot_id|>",
   "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant<|eot_id|>"
   "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
   "<|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|>"
   "<|start_header_id|>user<|end_header_id|>\n\nWho are you<|eot_id|>"
   "<|start_header_id|>assistant<|end_header_id|>\n\nI am an assistant<|eot_id|>"
   "<|start_header_id|>user<|end_header_id|>\n\nAnother question<|eot_id|>"
   "<|start_header_id|>assistant<|end_header_id|>\n\n"},
  {ChatTemplate::Llama31, "<|begin_of_text|>", "<|eot_id|>",
   "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
   "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\nYou are a helpful assistant<|eot_id|>"
   "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
   "<|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|>"
   "<|start_header_id|>user<|end_header_id|>\n\nWho are you<|eot_id|>"
   "<|start_header_id|>assistant<|end_header_id|>\n\nI am an assistant<|eot_id|>"
   "<|start_header_id|>user<|end_header_id|>\n\nAnother question<|eot_id|>"
   "<|start_header_id|>assistant<|end_header_id|>\n\n"},
  {ChatTemplate::MistralLegacy, "<s>", "</s>",
   "<s>[INST] You are a helpful assistant\n\nHello [/INST]Hi there</s>[INST] Who are you [/INST]"
   "   I am an assistant   </s>[INST] Another question [/INST]"},
  {ChatTemplate::MistralV1, "<s>", "</s>",
   "<s> [INST] You are a helpful assistant\n\nHello [/INST] Hi there</s> [INST] Who are you [/INST]"
   "    I am an assistant   </s> [INST] Another question [/INST]"},
  {ChatTemplate::MistralV3, "<s>", "</s>",
   "<s>[INST] Hello[/INST] Hi there</s>[INST] Who are you[/INST] I am an assistant</s>"
   "[INST] You are a helpful assistant\n\nAnother question[/INST]"},
  {ChatTemplate::MistralV3Tekken, "<s>", "</s>",
   "<s>[INST]Hello[/INST]Hi there</s>[INST]Who are you[/INST]   I am an assistant   </s>"
   "[INST]You are a helpful assistant\n\nAnother question[/INST]"},
  {ChatTemplate::MistralV7, "<s>", "</s>",
   "<s>[SYSTEM_PROMPT] You are a helpful assistant[/SYSTEM_PROMPT][INST] Hello[/INST] Hi there</s>"
   "[INST] Who are you[/INST]    I am an assistant   </s>[INST] Another question[/INST]"},
  {ChatTemplate::Gemma, "<bos>", "<eos>",
   "<bos><start_of_turn>user\nYou are a helpful assistant\n\nHello<end_of_turn>\n"
   "<start_of_turn>model\nHi there<end_of_turn>\n<start_of_turn>user\nWho are you<end_of_turn>\n"
   "<start_of_turn>model\nI am an assistant<end_of_turn>\n<start_of_turn>user\nAnother question<end_of_turn>\n"
   "<start_of_turn>model\n"},
  {ChatTemplate::Phi3, "<s>", "<|endoftext|>",
   "<|system|>\nYou are a helpful assistant<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\nHi there<|end|>\n"
   "<|user|>\nWho are you<|end|>\n<|assistant|>\n   I am an assistant   <|end|>\n"
   "<|user|>\nAnother question<|end|>\n<|assistant|>\n"},
  {ChatTemplate::Zephyr, "<s>", "</s>",
   "<|system|>\nYou are a helpful assistant</s>\n<|user|>\nHello</s>\n<|assistant|>\nHi there</s>\n"
   "<|user|>\nWho are you</s>\n<|assistant|>\n   I am an assistant   </s>\n"
   "<|user|>\nAnother question</s>\n<|assistant|>\n"},
};
// clang-format on

const Expected& expected_for(ChatTemplate t) {
  for (const Expected& e : kExpected) {
    if (e.tmpl == t) return e;
  }
  return kExpected[0];
}

std::string render(ChatTemplate t, const std::vector<ChatMessage>& m, bool agp) {
  const Expected& e = expected_for(t);
  return render_chat(t, m, agp, e.bos, e.eos);
}

std::vector<ChatMessage> first(const std::vector<ChatMessage>& m, size_t n) {
  return {m.begin(), m.begin() + static_cast<std::ptrdiff_t>(n)};
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

TEST(ChatTemplate, EveryFamilyRendersTheReferenceConversation) {
  for (const Expected& e : kExpected) {
    SCOPED_TRACE(chat_template_name(e.tmpl));
    EXPECT_EQ(render_chat(e.tmpl, kConversation, true, e.bos, e.eos), e.text);
  }
  // Qwen2.5 differs from Qwen2 only by its default system message.
  EXPECT_EQ(render_chat(ChatTemplate::Qwen25, kConversation, true, "", ""), expected_for(ChatTemplate::Qwen2).text);
}

TEST(ChatTemplate, DefaultAndAbsentSystemMessages) {
  const std::vector<ChatMessage> hello = {{"user", "Hello"}};
  EXPECT_EQ(render(ChatTemplate::Qwen2, hello, true),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(render(ChatTemplate::Qwen25, hello, false),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHello<|im_end|>\n");
  EXPECT_EQ(render(ChatTemplate::ChatML, hello, false), "<|im_start|>user\nHello<|im_end|>\n");
  EXPECT_EQ(render(ChatTemplate::Llama31, hello, true),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
            "Today Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(render(ChatTemplate::Llama2, hello, true), "<s>[INST] Hello [/INST]");
  EXPECT_EQ(render(ChatTemplate::Gemma, hello, true),
            "<bos><start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n");
  // Llama-2 strips the whole first turn (system block + user text), so a blank user message eats the
  // "\n\n" after <</SYS>>; the system message itself is not stripped.
  EXPECT_EQ(render(ChatTemplate::Llama2, {{"system", " S "}, {"user", " \n"}}, true),
            "<s>[INST] <<SYS>>\n S \n<</SYS>> [/INST]");
}

TEST(ChatTemplate, GenerationPromptOffAndEndOfSequence) {
  const auto two = first(kConversation, 3);  // system, user, assistant
  EXPECT_EQ(render(ChatTemplate::Phi3, two, false),
            "<|system|>\nYou are a helpful assistant<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\nHi there<|end|>\n"
            "<|endoftext|>");
  EXPECT_EQ(render(ChatTemplate::Zephyr, two, false),
            "<|system|>\nYou are a helpful assistant</s>\n<|user|>\nHello</s>\n<|assistant|>\nHi there</s>\n");
  EXPECT_EQ(render(ChatTemplate::Gemma, two, false),
            "<bos><start_of_turn>user\nYou are a helpful assistant\n\nHello<end_of_turn>\n"
            "<start_of_turn>model\nHi there<end_of_turn>\n");
  // Templates without a generation prompt render the same either way.
  for (ChatTemplate t : {ChatTemplate::Llama2, ChatTemplate::MistralV1, ChatTemplate::MistralV7}) {
    EXPECT_EQ(render(t, kConversation, false), render(t, kConversation, true)) << chat_template_name(t);
  }
  // Mistral v3 writes the system message into the last turn only when that turn is a user turn.
  EXPECT_EQ(render(ChatTemplate::MistralV3, two, false), "<s>[INST] Hello[/INST] Hi there</s>");
}

TEST(ChatTemplate, PythonStripMatchesStrStrip) {
  EXPECT_EQ(py_strip(" \t\n\r\v\fx y\x1c\x1f "), "x y");
  EXPECT_EQ(py_strip("\xc2\xa0\xe3\x80\x80x\xe2\x80\xa8\xc2\x85"), "x");  // U+00A0 U+3000 x U+2028 U+0085
  EXPECT_EQ(py_strip("\xe2\x80\x8bx"), "\xe2\x80\x8bx");                  // U+200B is not whitespace
  EXPECT_EQ(py_strip(" \xff x \x80"), "\xff x \x80");                     // invalid UTF-8 is kept
  EXPECT_EQ(py_strip("   "), "");
  EXPECT_EQ(py_strip(""), "");
  EXPECT_EQ(render(ChatTemplate::Llama3, {{"user", "\xc2\xa0Hi\xe3\x80\x80"}}, false),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>");
}

// (A) and (B) from chat_template.h over every prefix of `conv`.
struct Stability {
  bool a = true;
  bool b = true;
};

Stability check_stability(ChatTemplate t, const std::vector<ChatMessage>& conv) {
  Stability s;
  for (size_t k = 1; k < conv.size(); ++k) {
    const std::string shorter = render(t, first(conv, k), false);
    if (!starts_with(render(t, first(conv, k + 1), false), shorter)) s.a = false;
    if (!starts_with(render(t, first(conv, k + 1), true), shorter)) s.a = false;
    if (conv[k - 1].role == "user" && k + 2 <= conv.size() &&
        !starts_with(render(t, first(conv, k + 2), true), render(t, first(conv, k), true))) {
      s.b = false;
    }
  }
  return s;
}

TEST(ChatTemplate, PrefixStabilityHoldsWhereDocumented) {
  const std::vector<ChatMessage> no_system(kConversation.begin() + 1, kConversation.end());
  for (const Expected& e : kExpected) {
    const ChatTemplate t = e.tmpl;
    SCOPED_TRACE(chat_template_name(t));
    const bool moves_system = t == ChatTemplate::MistralV3 || t == ChatTemplate::MistralV3Tekken;
    const Stability with = check_stability(t, kConversation);
    const Stability without = check_stability(t, no_system);
    EXPECT_EQ(with.a, !moves_system && t != ChatTemplate::Phi3);
    EXPECT_EQ(with.b, !moves_system);
    EXPECT_EQ(without.a, t != ChatTemplate::Phi3);
    EXPECT_TRUE(without.b);
  }
}

void expect_error(ChatTemplate t, const std::vector<ChatMessage>& m, const std::string& fragment) {
  try {
    render(t, m, true);
    ADD_FAILURE() << chat_template_name(t) << ": no error, expected one containing \"" << fragment << "\"";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find(fragment), std::string::npos) << err.what();
  }
}

TEST(ChatTemplate, BadMessageListsAreErrors) {
  for (const Expected& e : kExpected) {
    expect_error(e.tmpl, {}, "no messages");
    expect_error(e.tmpl, {{"user", "a"}, {"bot", "b"}}, "message 1 has role 'bot'");
    expect_error(e.tmpl, {{"user", "a"}, {"tool", "42"}}, "role 'tool'");
  }
  expect_error(ChatTemplate::Llama2, {{"assistant", "a"}, {"user", "b"}},
               "Conversation roles must alternate user/assistant/user/assistant/... (message 0 has role 'assistant')");
  expect_error(ChatTemplate::Gemma, {{"system", "s"}, {"user", "a"}, {"user", "b"}},
               "must alternate user/assistant/user/assistant/... (message 2 has role 'user')");
  expect_error(ChatTemplate::MistralV1, {{"user", "a"}, {"user", "b"}}, "After the optional system message");
  expect_error(ChatTemplate::MistralV3, {{"user", "a"}, {"system", "s"}}, "accepts one only as the first message");
  expect_error(ChatTemplate::MistralLegacy, {{"system", "s"}, {"system", "t"}, {"user", "a"}},
               "message 1 is a system message");
  // Templates that do not alternate take a system message anywhere.
  EXPECT_EQ(render(ChatTemplate::Llama3, {{"user", "a"}, {"system", "s"}}, false),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\na<|eot_id|>"
            "<|start_header_id|>system<|end_header_id|>\n\ns<|eot_id|>");
  EXPECT_EQ(render(ChatTemplate::MistralV7, {{"user", "a"}, {"user", "b"}}, false), "<s>[INST] a[/INST][INST] b[/INST]");
}

}  // namespace
}  // namespace preface::chat
