// Rendering cost of Jinja chat templates (parse once, render per request): a 10-turn chat (system + 10 user and
// 10 assistant messages + the last user message) through real templates from ../shared/templates, and the parse.
// Run from the project root: build-bench/chat_jinja_bench (reads ../shared/templates/*.json).
#include <benchmark/benchmark.h>

#include <fstream>

#include "chat/chat_jinja.h"

namespace {

using nlohmann::ordered_json;

std::string template_source(const std::string& file) {
  std::ifstream in("../shared/templates/" + file);
  if (!in) throw std::runtime_error("run from the project root: ../shared/templates/" + file + " not found");
  return ordered_json::parse(in)["template"].get<std::string>();
}

ordered_json ten_turns() {
  ordered_json m = ordered_json::array();
  m.push_back({{"role", "system"}, {"content", "You are a helpful assistant. Answer briefly and precisely."}});
  for (int i = 0; i < 10; ++i) {
    m.push_back({{"role", "user"}, {"content", "Question number " + std::to_string(i) + ": what is " +
                                                   std::to_string(i) + " times 17, and why?"}});
    m.push_back({{"role", "assistant"}, {"content", "It is " + std::to_string(i * 17) +
                                                        ", since multiplying by 17 adds 17 each time."}});
  }
  m.push_back({{"role", "user"}, {"content", "Thanks. One more: 11 times 17?"}});
  return m;
}

void BM_Render10Turns(benchmark::State& state, const char* file) {
  const preface::chat::JinjaChatTemplate t(template_source(file), "<s>", "</s>");
  const ordered_json messages = ten_turns();
  for (auto _ : state) benchmark::DoNotOptimize(t.render(messages, nullptr, true));
}

void BM_Parse(benchmark::State& state, const char* file) {
  const std::string src = template_source(file);
  for (auto _ : state) benchmark::DoNotOptimize(preface::chat::jinja::Template::parse(src));
}

BENCHMARK_CAPTURE(BM_Render10Turns, chatml, "chatml.json")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Render10Turns, llama3_8b, "meta-llama__Meta-Llama-3-8B-Instruct.json")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Render10Turns, llama3_2_tools, "meta-llama__Llama-3.2-11B-Vision-Instruct.json")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Render10Turns, qwen3, "Qwen__Qwen3-1.7B.json")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Render10Turns, mistral_small_3_1, "mistralai__Mistral-Small-3.1-24B-Instruct-2503.json")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Parse, qwen3, "Qwen__Qwen3-1.7B.json")->Unit(benchmark::kMicrosecond);

}  // namespace
