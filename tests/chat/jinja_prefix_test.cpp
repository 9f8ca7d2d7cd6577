// Prefix stability of the corpus templates (what makes multi-turn chats hit the prefix cache): for every
// assistant reply R at message i of a fixture, the prompt of the next turn (the messages up to the next
// assistant reply, with the generation prompt) starts with the prompt that produced R followed by R itself.
// Templates that cannot keep it are listed below with the reason, and checked for the weaker property that
// the previous prompt alone is a prefix where that holds.
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>

#include "chat/jinja_corpus.h"

namespace preface::chat {
namespace {

using nlohmann::ordered_json;

// template file -> why the reply does not appear verbatim after the previous prompt.
// (The previous prompt still is a prefix for all but those of kPromptNotPrefix, so the cache keeps it.)
const std::map<std::string, std::string> kReplyAltered = {
    {"CohereForAI__c4ai-command-r-v01.json", "strips the reply's surrounding whitespace"},
    {"Qwen__QwQ-32B.json", "drops earlier replies' <think> reasoning"},
    {"Qwen__Qwen3-1.7B.json", "drops the <think> reasoning of replies before the last user query"},
    {"deepseek-ai__DeepSeek-R1.json", "drops earlier replies' <think> reasoning"},
    {"deepseek-ai__DeepSeek-V2-Lite-Chat.json", "history has 'Assistant: ' + reply, the prompt ends 'Assistant:'"},
    {"google__gemma-3-1b-it.json", "trims the reply"},
    {"meta-llama__Llama-2-7b-chat-hf.json", "history has ' ' + reply.strip() after '[/INST]'"},
    {"meta-llama__Meta-Llama-3-8B-Instruct.json", "trims the reply"},
    {"mistralai__Mistral-7B-Instruct-v0.1.json", "history has ' ' + reply after '[/INST]'"},
    {"mistralai__Mistral-7B-Instruct-v0.3__early.json", "history has ' ' + reply|trim after '[/INST]'"},
    {"mistralai__Mistral-Large-Instruct-2411.json", "history has ' ' + reply after '[/INST]'"},
    {"mistralai__Mixtral-8x22B-Instruct-v0.1.json", "puts the system message into the last user turn"},
    {"openchat__openchat-3.5-0106.json", "history has 'Assistant: ' + reply, the prompt ends 'Assistant:'"},
    {"vicuna-v1.5.json", "history has ' ' + reply after 'ASSISTANT:'"},
    // The templates of 2026 (templates/2026/):
    {"2026/GLM-4.6.json", "history has '\\n<think></think>\\n' + reply after '<|assistant|>'"},
    {"2026/MiniMax-M2.json", "the generation prompt opens '<think>\\n', which the history does not repeat"},
    {"2026/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json",
     "history has '<think></think>' + reply, the generation prompt ends '<think>\\n'"},
    {"2026/Qwen3.5-4B.json", "the generation prompt opens '<think>\\n', which the history does not repeat"},
    {"2026/deepseek-ai-DeepSeek-V3.1.json", "drops earlier replies' <think> reasoning"},
    {"2026/deepseek-ai-DeepSeek-V3.2.json",
     "history has '</think>' + reply, the generation prompt ends '<think></think>'"},
    {"2026/google-gemma-4-31B-it.json",
     "the generation prompt opens an empty thought channel the history does not repeat"},
    {"2026/openai-gpt-oss-120b.json",
     "history has '<|channel|>final<|message|>' + reply, the prompt ends '<|start|>assistant'"},
};
// template file -> why even the previous prompt is not a prefix of the next one.
const std::map<std::string, std::string> kPromptNotPrefix = {
    {"Qwen__QwQ-32B.json", "the generation prompt opens '<think>\\n', which the history does not repeat"},
    {"deepseek-ai__DeepSeek-R1.json", "the generation prompt opens '<think>\\n', which the history does not repeat"},
    {"mistralai__Mixtral-8x22B-Instruct-v0.1.json", "the system message moves to the last user turn"},
    {"2026/MiniMax-M2.json", "the generation prompt ends '<think>\\n', which the history does not repeat"},
    {"2026/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json",
     "the generation prompt ends '<think>\\n', the history '<think></think>'"},
    {"2026/Qwen3.5-4B.json", "the generation prompt ends '<think>\\n', which the history does not repeat"},
    {"2026/deepseek-ai-DeepSeek-V3.2.json", "the generation prompt ends '<think></think>', the history '</think>'"},
    {"2026/google-gemma-4-31B-it.json", "the generation prompt ends an empty thought channel the history drops"},
};

ordered_json first(const ordered_json& messages, size_t n) {
  ordered_json out = ordered_json::array();
  for (size_t i = 0; i < n; ++i) out.push_back(messages[i]);
  return out;
}

TEST(JinjaPrefix, NextPromptExtendsPromptAndReply) {
  const auto fixtures = test::load_corpus_fixtures();
  std::set<std::string> altered, not_prefix;
  size_t checked = 0;
  for (const test::CorpusTemplate& ct : test::load_corpus_templates(/*with_2026=*/true)) {
    const JinjaChatTemplate t(ct.doc["template"].get<std::string>(), ct.bos, ct.eos);
    for (const char* name : {"system_multi_turn", "think_in_history", "unicode_whitespace"}) {
      const ordered_json& fx = fixtures.at(name);
      const ordered_json& m = fx["messages"];
      const ordered_json kwargs = fx.value("template_kwargs", ordered_json());
      for (size_t i = 1; i < m.size(); ++i) {
        if (m[i]["role"] != "assistant" || !m[i]["content"].is_string()) continue;
        size_t next = i + 1;
        while (next < m.size() && m[next]["role"] != "assistant") ++next;
        if (next == i + 1) continue;  // no next user turn
        std::string before, after;
        try {
          before = t.render(first(m, i), nullptr, true, kwargs, test::corpus_config()).text;
          after = t.render(first(m, next), nullptr, true, kwargs, test::corpus_config()).text;
        } catch (const jinja::JinjaError&) {
          continue;  // the template rejects this conversation (the corpus test checks how)
        }
        ++checked;
        const std::string reply = m[i]["content"].get<std::string>();
        if (after.rfind(before + reply, 0) == 0) continue;
        altered.insert(ct.file);
        if (after.rfind(before, 0) != 0) not_prefix.insert(ct.file);
        SCOPED_TRACE(ct.file + " " + name + " reply " + std::to_string(i));
        if (std::getenv("JINJA_PREFIX_DEBUG")) {
          size_t k = 0;
          const std::string want = before + reply;
          while (k < after.size() && k < want.size() && after[k] == want[k]) ++k;
          std::printf("DIFF %s %s @%zu\n  want: %s\n  got:  %s\n", ct.file.c_str(), name, k,
                      want.substr(k > 20 ? k - 20 : 0, 60).c_str(), after.substr(k > 20 ? k - 20 : 0, 60).c_str());
        }
        if (!kReplyAltered.count(ct.file)) ADD_FAILURE() << "reply not kept verbatim after the previous prompt";
        if (after.rfind(before, 0) != 0 && !kPromptNotPrefix.count(ct.file)) {
          ADD_FAILURE() << "previous prompt is not a prefix";
        }
      }
    }
  }
  EXPECT_GT(checked, 60u);
  for (const auto& [file, why] : kReplyAltered) EXPECT_TRUE(altered.count(file)) << file << " now keeps replies: unlist it";
  for (const auto& [file, why] : kPromptNotPrefix) EXPECT_TRUE(not_prefix.count(file)) << file << ": unlist it";
}

}  // namespace
}  // namespace preface::chat
