// Chat template family detection on real `tokenizer.chat_template` strings (as stored in GGUF files: Jinja
// escapes such as \n are still escapes), template names, and the BOS contract of encode_chat_prompt() with
// real vocabularies from ../shared/vocab.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "chat/chat_template.h"
#include "support/shared_data.h"
#include "tokenizer/tokenizer.h"

namespace preface::chat {
namespace {

struct Source {
  const char* model;
  const char* jinja;
  ChatTemplate expected;
};

// clang-format off
const Source kSources[] = {
  {"teknium/OpenHermes-2.5-Mistral-7B",
   R"({% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %})",
   ChatTemplate::ChatML},
  {"Qwen/Qwen2-7B-Instruct",
   R"({% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %})",
   ChatTemplate::Qwen2},
  {"Qwen/Qwen2.5-7B-Instruct (excerpt)",
   "{%- else %}\n    {%- if messages[0]['role'] == 'system' %}\n        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n    {%- else %}\n        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}\n    {%- endif %}\n",
   ChatTemplate::Qwen25},
  {"meta-llama/Llama-2-7b-chat-hf",
   R"({% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\n' + system_message + '\n<</SYS>>\n\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %})",
   ChatTemplate::Llama2},
  {"meta-llama/Meta-Llama-3-8B-Instruct",
   R"({% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %})",
   ChatTemplate::Llama3},
  {"meta-llama/Meta-Llama-3.1-8B-Instruct (excerpt)",
   "{#- System message + builtin tools #}\n{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}\n{{- \"Cutting Knowledge Date: December 2023\\n\" }}\n{{- \"Today Date: \" + date_string + \"\\n\\n\" }}\n{{- system_message }}\n{{- \"<|eot_id|>\" }}\n",
   ChatTemplate::Llama31},
  {"mistralai/Mixtral-8x7B-Instruct-v0.1 (early)",
   R"({{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %})",
   ChatTemplate::MistralLegacy},
  {"mistralai/Mistral-7B-Instruct-v0.2 (excerpt)",
   "    {%- if message['role'] == 'user' %}\n        {%- if loop.first and system_message is defined %}\n            {{- ' [INST] ' + system_message + '\\n\\n' + message['content'] + ' [/INST]' }}\n        {%- else %}\n            {{- ' [INST] ' + message['content'] + ' [/INST]' }}\n",
   ChatTemplate::MistralV1},
  {"mistralai/Mistral-7B-Instruct-v0.3 (excerpt)",
   "            {{- \"[AVAILABLE_TOOLS] [\" }}\n        {%- if loop.last and system_message is defined %}\n            {{- \"[INST] \" + system_message + \"\\n\\n\" + message[\"content\"] + \"[/INST]\" }}\n        {%- else %}\n            {{- \"[INST] \" + message[\"content\"] + \"[/INST]\" }}\n",
   ChatTemplate::MistralV3},
  {"mistralai/Mistral-Nemo-Instruct-2407 (excerpt)",
   "            {{- \"[AVAILABLE_TOOLS][\" }}\n        {%- if loop.last and system_message is defined %}\n            {{- \"[INST]\" + system_message + \"\\n\\n\" + message[\"content\"] + \"[/INST]\" }}\n        {%- else %}\n            {{- \"[INST]\" + message[\"content\"] + \"[/INST]\" }}\n",
   ChatTemplate::MistralV3Tekken},
  {"mistralai/Mistral-Large-Instruct-2411",
   R"({{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + '[/INST]' }}{% elif message['role'] == 'system' %}{{ '[SYSTEM_PROMPT] ' + message['content'] + '[/SYSTEM_PROMPT]' }}{% elif message['role'] == 'assistant' %}{{ ' ' + message['content'] + eos_token }}{% else %}{{ raise_exception('Only user, system and assistant roles are supported!') }}{% endif %}{% endfor %})",
   ChatTemplate::MistralV7},
  {"google/gemma-2-9b-it",
   R"({{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %})",
   ChatTemplate::Gemma},
  {"microsoft/Phi-3-mini-4k-instruct",
   R"({% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'assistant' %}{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %})",
   ChatTemplate::Phi3},
  {"HuggingFaceH4/zephyr-7b-beta",
   "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\n' + message['content'] + eos_token }}\n{% elif message['role'] == 'system' %}\n{{ '<|system|>\n' + message['content'] + eos_token }}\n{% elif message['role'] == 'assistant' %}\n{{ '<|assistant|>\n'  + message['content'] + eos_token }}\n{% endif %}\n{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}",
   ChatTemplate::Zephyr},
};
// clang-format on

TEST(ChatTemplateDetect, RealTemplatesMapToTheirFamily) {
  for (const Source& s : kSources) {
    SCOPED_TRACE(s.model);
    const std::optional<ChatTemplate> got = recognize_chat_template(s.jinja);
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(chat_template_name(*got), std::string(chat_template_name(s.expected)));
    EXPECT_EQ(detect_chat_template(s.jinja), s.expected);
  }
}

TEST(ChatTemplateDetect, UnknownAndEmptyFallBackToChatML) {
  const char* phi4 =
      "{% for message in messages %}{% if (message['role'] == 'system') %}{{'<|im_start|>system<|im_sep|>' + "
      "message['content'] + '<|im_end|>'}}{% endif %}{% endfor %}";
  const char* chatglm4 =
      "[gMASK]<sop>{% for item in messages %}<|{{ item['role'] }}|>\n{{ item['content'] }}{% endfor %}"
      "{% if add_generation_prompt %}<|assistant|>\n{% endif %}<|user|>";
  for (const char* src : {"", "{{ messages[0]['content'] }}", phi4, chatglm4}) {
    EXPECT_FALSE(recognize_chat_template(src).has_value()) << src;
    EXPECT_EQ(detect_chat_template(src), ChatTemplate::ChatML) << src;
  }
}

TEST(ChatTemplateDetect, NamesRoundTripAndOverrideDetection) {
  const std::string names = chat_template_names();
  for (int i = 0; i <= static_cast<int>(ChatTemplate::Zephyr); ++i) {
    const auto t = static_cast<ChatTemplate>(i);
    const std::string name = chat_template_name(t);
    EXPECT_EQ(chat_template_from_name(name), t) << name;
    EXPECT_EQ(recognize_chat_template(name), t) << name;  // a bare name stored as the template
    EXPECT_NE(names.find(name), std::string::npos) << names;
  }
  EXPECT_EQ(chat_template_from_name("llama2-sys-strip"), ChatTemplate::Llama2);
  EXPECT_FALSE(chat_template_from_name("jinja").has_value());
  EXPECT_FALSE(chat_template_from_name("").has_value());
  EXPECT_FALSE(chat_template_from_name("ChatML").has_value());
}

std::unique_ptr<Tokenizer> load_vocab(const std::string& name, std::optional<std::string>* chat_template) {
  const auto path = test::shared_file("vocab/" + name);
  if (path.empty()) return nullptr;
  const gguf::File file = gguf::File::open(path.string());
  if (chat_template != nullptr) *chat_template = file.try_string("tokenizer.chat_template");
  return Tokenizer::from_gguf(file);
}

size_t count_id(const std::vector<int32_t>& ids, int32_t id) {
  return static_cast<size_t>(std::count(ids.begin(), ids.end(), id));
}

const std::vector<ChatMessage> kChat = {
    {"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Bye"}};

TEST(ChatTemplateTokens, TemplateBosIsNeverDoubled) {
  const auto tok = load_vocab("ggml-vocab-llama-spm.gguf", nullptr);
  ASSERT_NE(tok, nullptr);
  ASSERT_EQ(chat_bos_text(*tok), "<s>");
  ASSERT_EQ(chat_eos_text(*tok), "</s>");
  const std::string text = render_chat(ChatTemplate::Llama2, kChat, true, "<s>", "</s>");
  ASSERT_EQ(text.rfind("<s>[INST] <<SYS>>", 0), 0u) << text;
  const std::vector<int32_t> ids = encode_chat_prompt(*tok, text);
  EXPECT_EQ(ids, render_chat_tokens(*tok, ChatTemplate::Llama2, kChat, true));
  // Same ids as parsing the template's own "<s>" as the special token, with nothing added.
  EXPECT_EQ(ids, tok->encode(text, /*add_bos=*/false, /*parse_special=*/true));
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(ids[0], tok->bos_id());
  EXPECT_NE(ids[1], tok->bos_id());
  EXPECT_EQ(count_id(ids, tok->bos_id()), 2u);  // one per user turn
  EXPECT_EQ(count_id(ids, tok->eos_id()), 1u);  // after the assistant turn

  // A template that writes no BOS gets the vocabulary's own, once.
  const std::vector<int32_t> chatml = render_chat_tokens(*tok, ChatTemplate::ChatML, kChat, true);
  EXPECT_EQ(count_id(chatml, tok->bos_id()), tok->add_bos_default() ? 1u : 0u);
  if (tok->add_bos_default()) {
    EXPECT_EQ(chatml[0], tok->bos_id());
  }
}

TEST(ChatTemplateTokens, Phi3ControlTokensBecomeSingleIds) {
  std::optional<std::string> jinja;
  const auto tok = load_vocab("ggml-vocab-phi-3.gguf", &jinja);
  ASSERT_NE(tok, nullptr);
  ASSERT_TRUE(jinja.has_value());
  EXPECT_EQ(detect_chat_template(*jinja), ChatTemplate::Phi3);  // the April-2024 template

  const std::vector<int32_t> ids = render_chat_tokens(*tok, ChatTemplate::Phi3, kChat, false);
  const std::vector<std::pair<std::string, size_t>> specials = {
      {"<|system|>", 1}, {"<|user|>", 2}, {"<|assistant|>", 1}, {"<|end|>", 4}};
  for (const auto& [text, n] : specials) {
    int32_t id = -1;
    for (int32_t i = 0; i < tok->n_vocab(); ++i) {
      if (tok->piece(i) == text) id = i;
    }
    ASSERT_GE(id, 0) << text;
    EXPECT_EQ(count_id(ids, id), n) << text;
  }
  EXPECT_EQ(ids.back(), tok->eos_id());  // add_generation_prompt=false ends with EOS
  EXPECT_EQ(count_id(ids, tok->bos_id()), tok->add_bos_default() ? 1u : 0u);
}

}  // namespace
}  // namespace preface::chat
