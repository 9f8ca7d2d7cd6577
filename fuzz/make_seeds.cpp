// Writes the seed corpora of the fuzz targets into <root>/<target>/ (usage: fuzz_make_seeds fuzz/corpus).
// GGUF seeds are small files built with the project's own gguf::Writer covering every value type, every
// tensor type, a non-default alignment, a version-2 header and tiny tokenizer vocabs (SentencePiece with byte
// fallback, byte-level BPE with merges). Text, id and request seeds start with the targets' selector byte.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gguf/writer.h"
#include "grammar/tool_formats.h"
#include "kv/tier_record.h"
#include "tokenizer/unicode.h"
#include "util/error.h"

namespace preface::fuzz {
namespace {

namespace fs = std::filesystem;

void write_file(const fs::path& path, const std::vector<uint8_t>& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw Error("cannot write " + path.string());
}

void write_text(const fs::path& path, uint8_t selector, const std::string& text) {
  std::vector<uint8_t> bytes = {selector};
  bytes.insert(bytes.end(), text.begin(), text.end());
  write_file(path, bytes);
}

gguf::Value scalar(gguf::ValueType t, int64_t i, double f = 0) {
  gguf::Value v;
  v.type = t;
  v.i = i;
  v.f = f;
  return v;
}

gguf::Value numeric_array(gguf::ValueType elem, std::vector<double> nums) {
  gguf::Value v;
  v.type = gguf::ValueType::ARRAY;
  v.elem_type = elem;
  v.nums = std::move(nums);
  return v;
}

std::vector<uint8_t> every_scalar() {
  using enum gguf::ValueType;
  gguf::Writer w;
  w.set_value("u8", scalar(UINT8, 200));
  w.set_value("i8", scalar(INT8, -100));
  w.set_value("u16", scalar(UINT16, 60000));
  w.set_value("i16", scalar(INT16, -30000));
  w.set_u32("u32", 4000000000u);
  w.set_i32("i32", -2000000000);
  w.set_u64("u64", 1ull << 40);
  w.set_value("i64", scalar(INT64, -(int64_t{1} << 40)));
  w.set_f32("f32", 1.5f);
  w.set_value("f64", scalar(FLOAT64, 0, -2.25));
  w.set_bool("bool", true);
  w.set_string("general.name", "seed");
  return w.to_bytes();
}

std::vector<uint8_t> every_array() {
  using enum gguf::ValueType;
  gguf::Writer w;
  w.set_value("a.u8", numeric_array(UINT8, {0, 255}));
  w.set_value("a.i16", numeric_array(INT16, {-5, 5}));
  w.set_i32_array("a.i32", {1, -2, 3});
  w.set_value("a.u64", numeric_array(UINT64, {7}));
  w.set_f32_array("a.f32", {0.5f, -1.0f});
  w.set_value("a.f64", numeric_array(FLOAT64, {-2.5e10}));
  w.set_value("a.bool", numeric_array(BOOL, {0, 1}));
  w.set_string_array("a.str", {"x", "", "longer string"});
  w.set_value("a.empty", numeric_array(INT32, {}));
  return w.to_bytes();
}

std::vector<uint8_t> every_tensor(int64_t alignment) {
  gguf::Writer w;
  if (alignment != 0) w.set_u32("general.alignment", static_cast<uint32_t>(alignment));
  std::vector<float> v64(64);  // [64] values for the tensors below
  for (size_t i = 0; i < v64.size(); ++i) v64[i] = static_cast<float>(i) * 0.25f - 8.0f;
  w.add_tensor_f32("f32", gguf::TensorType::F32, {4}, {1, 2, 3, 4});
  w.add_tensor_f32("f16", gguf::TensorType::F16, {8, 2}, std::vector<float>(v64.begin(), v64.begin() + 16));
  w.add_tensor_f32("bf16", gguf::TensorType::BF16, {2, 1, 1, 2}, {1, -1, 0.5, 2});
  w.add_tensor_f32("q8_0", gguf::TensorType::Q8_0, {32, 2}, v64);
  w.add_tensor_f32("q4_0", gguf::TensorType::Q4_0, {32}, std::vector<float>(v64.begin(), v64.begin() + 32));
  return w.to_bytes();
}

// 3 control tokens, 256 byte tokens <0xXX>, a few scored pieces and a user-defined token. The token types
// are stored as `types_elem` (INT32 as converters write them; UINT32/FLOAT32 variants let mutations reach
// values outside the int range).
std::vector<uint8_t> spm_vocab(gguf::ValueType types_elem = gguf::ValueType::INT32) {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<float> scores = {0, 0, 0};
  std::vector<double> types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof(hex), "<0x%02X>", b);
    tokens.push_back(hex);
    scores.push_back(0);
    types.push_back(6);
  }
  for (const char* piece : {"\xE2\x96\x81", "a", "b", "ab", "\xE2\x96\x81" "a", "\xE2\x96\x81" "ab", "<user>"}) {
    tokens.push_back(piece);
    scores.push_back(-static_cast<float>(tokens.size()));
    types.push_back(std::string(piece) == "<user>" ? 4 : 1);
  }
  gguf::Writer w;
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  w.set_f32_array("tokenizer.ggml.scores", scores);
  w.set_value("tokenizer.ggml.token_type", numeric_array(types_elem, types));
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
  w.set_u32("tokenizer.ggml.unknown_token_id", 0);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  return w.to_bytes();
}

// The 256 GPT-2 byte characters, a few merges, and an end-of-text control token.
std::vector<uint8_t> bpe_vocab(const std::string& pre) {
  const tok::ByteMap map;
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(map.encode(static_cast<uint8_t>(b)));
    types.push_back(1);
  }
  const std::string space = map.encode(' ');
  for (const std::string& piece : {space + "t", std::string("he"), space + "the", std::string("<|endoftext|>")}) {
    tokens.push_back(piece);
    types.push_back(piece == "<|endoftext|>" ? 3 : 1);
  }
  gguf::Writer w;
  w.set_string("tokenizer.ggml.model", "gpt2");
  if (!pre.empty()) w.set_string("tokenizer.ggml.pre", pre);
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  w.set_i32_array("tokenizer.ggml.token_type", types);
  w.set_string_array("tokenizer.ggml.merges", {space + " t", "h e", space + "t he"});
  w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(tokens.size() - 1));
  w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(tokens.size() - 1));
  return w.to_bytes();
}

const std::vector<std::string> kTexts = {
    "Hello world",
    " leading and  double spaces ",
    "multi\nline\ttabs\r\n",
    "unicode: h\xC3\xA9llo \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\xA6\x99",
    "<s>special</s> <unk> text",
    "<|assistant|>hi<|end|><|endoftext|>",
    "3.14159 12345 1,000,000",
    "don't I'm we'll THEY'RE",
    "broken \xE4\xBD utf8 \xFF\xC0\x80",
};

// Request bodies; the selector byte is the chat template + 14 * endpoint (see the request targets).
const std::vector<std::string> kOpenAICompletions = {
    R"({"model":"stories260K","prompt":"Once upon a time","max_tokens":8,"temperature":0})",
    R"({"prompt":[1,2,3,400],"logprobs":2,"seed":-5,"stop":["\n","The"],"top_k":-1,"min_p":0.1})",
    R"({"prompt":["a story"],"stream":true,"stream_options":{"include_usage":true},"cache_salt":"s","n":1})",
    R"({"prompt":"x","response_format":{"type":"text"},"repetition_penalty":1.1,"presence_penalty":-2})",
    R"({"prompt":"Once upon a time","max_tokens":2,"prompt_cache_retention":"24h","prompt_cache_key":"k"})",
};
const std::vector<std::string> kOpenAIChats = {
    R"({"messages":[{"role":"system","content":"Be brief"},{"role":"user","content":"Hi"}],"max_tokens":4})",
    R"({"messages":[{"role":"developer","content":[{"type":"text","text":"A"},{"type":"text","text":"B"}]},)"
    R"({"role":"user","content":"Q"},{"role":"assistant","content":null},{"role":"user","content":"R"}],)"
    R"("logprobs":true,"top_logprobs":2,"stream":true,"max_completion_tokens":3,"top_p":0.9})",
    R"({"messages":[{"role":"user","content":"<s>[INST] \u00e9\ud83e\udd99"}],"stop":"!","temperature":2})",
    R"({"messages":[{"role":"system","content":[{"type":"text","text":"S","prompt_cache_breakpoint":)"
    R"({"mode":"explicit","ttl":"12h"}}]},{"role":"user","content":[{"type":"text","text":"A"},{"type":"text",)"
    R"("text":"B","prompt_cache_breakpoint":{"mode":"explicit"}}]}],"prompt_cache_options":{"mode":"implicit",)"
    R"("ttl":"30m"},"max_tokens":2})",
};
const std::vector<std::string> kResponses = {
    R"({"input":"Hello","max_output_tokens":16})",
    R"({"instructions":"Be brief.","input":[{"role":"user","content":[{"type":"input_text","text":"Hi"}]},)"
    R"({"type":"message","role":"assistant","content":[{"type":"output_text","text":"Yes"}]},)"
    R"({"type":"function_call","call_id":"c1","name":"f","arguments":"{\"a\":1}"},)"
    R"({"type":"function_call_output","call_id":"c1","output":"ok"}],"tools":[{"type":"function","name":"f",)"
    R"("parameters":{"type":"object","properties":{"a":{"type":"integer","minimum":0}}}}],"tool_choice":"auto"})",
    R"({"input":"x","text":{"format":{"type":"json_schema","name":"s","schema":{"type":"object",)"
    R"("properties":{"n":{"type":"number","exclusiveMinimum":0}}}}},"reasoning":{"effort":"low"},"store":false})",
    R"({"input":"x","previous_response_id":"resp_x","stream":true,"metadata":{"k":"v"}})",
};

const std::vector<std::string> kAnthropic = {
    R"({"model":"stories260K","max_tokens":16,"messages":[{"role":"user","content":"Hello"}]})",
    R"({"max_tokens":8,"system":[{"type":"text","text":"S","cache_control":{"type":"ephemeral","ttl":"1h"}}],)"
    R"("messages":[{"role":"user","content":[{"type":"text","text":"Hi","cache_control":{"type":"ephemeral"}}]},)"
    R"({"role":"assistant","content":"Once"}],"stop_sequences":["x"],"temperature":0.5,"top_k":5})",
    R"({"max_tokens":1,"system":"sys","messages":[{"role":"user","content":"a"},{"role":"user","content":"b"},)"
    R"({"role":"assistant","content":[{"type":"text","text":"c"}]},{"role":"user","content":"d"}],"stream":true,)"
    R"("metadata":{"user_id":"u"},"thinking":{"type":"disabled"},"cache_salt":"t","top_p":1})",
};

// Grammar seeds: GBNF texts and JSON Schemas covering each construct the compilers accept, and a few they reject.
const std::vector<std::string> kGbnf = {
    "root ::= \"a\" ( \"b\" | \"cd\" )* [0-9]{1,3} # comment\n",
    "root ::= obj\nobj ::= \"{\" ( [a-z]+ \":\" obj )? \"}\"\n",
    "root ::= [^\"\\\\\\x00-\\x1F] \"\\u00e9\" . [\u0100-\\U0001F600]?\n",
    "root ::= x{2} x{1,} x{0,2}\nx ::= \"x\" | \"yz\"\n",
    "root ::= root \"x\" | \"y\"\n",
};
const std::vector<std::string> kSchemas = {
    R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string","maxLength":3}},"required":["a"]})",
    R"({"type":"array","items":{"anyOf":[{"enum":["x",1,null]},{"const":{"k":true}}]},"minItems":1,"maxItems":3})",
    R"({"$defs":{"n":{"type":"object","properties":{"c":{"type":"array","items":{"$ref":"#/$defs/n"}}}}},"$ref":"#/$defs/n"})",
    R"({"type":"string","pattern":"^[A-Z]{2}-\d+(x|y)?$"})",
    R"({"type":["string","null"],"format":"date-time"})",
    R"({"oneOf":[{"type":"number"},{"type":"boolean"}],"title":"t"})",
    R"({"type":"object","additionalProperties":{"type":"integer"}})",
    R"({"type":"integer","minimum":0})",
};

void write_requests(const fs::path& dir, const std::vector<std::string>& bodies, int endpoint) {
  for (size_t k = 0; k < bodies.size(); ++k) {
    for (const int tmpl : {0, 3, 8, 11}) {  // chatml, llama2, mistral-v3, gemma
      const auto selector = static_cast<uint8_t>(tmpl + 14 * endpoint);
      write_text(dir / ("body" + std::to_string(endpoint) + "_" + std::to_string(k) + "_" + std::to_string(tmpl)),
                 selector, bodies[k]);
    }
  }
}

// KV block records of the cache tiers: a block of 4 and of 16 tokens, uncompressed and zstd.
void write_tier_records(const fs::path& dir) {
  for (const int32_t block_size : {4, 16}) {
    for (const auto compression : {kv::Compression::None, kv::Compression::Zstd}) {
      kv::RecordMeta m;
      m.ns = kv::namespace_digest("model", "f16", block_size, "rope", "");
      m.parent = m.ns;
      for (int32_t i = 0; i < block_size; ++i) m.tokens.push_back(1 + 3 * i);
      m.hash = kv::chain_hash(m.parent, m.tokens);
      m.model = kv::model_digest("model");
      m.kv_type = "f16";
      m.block_size = block_size;
      m.payload_bytes = 64u * static_cast<uint32_t>(block_size);
      std::vector<uint8_t> payload(m.payload_bytes);
      for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i % 7);
      write_file(dir / ("block" + std::to_string(block_size) + (compression == kv::Compression::Zstd ? "_zstd" : "") +
                        ".kvb"),
                 kv::encode_record(m, payload, compression));
    }
  }
}

void write_all(const fs::path& root) {
  write_tier_records(root / "tier_record");
  const fs::path gguf_dir = root / "gguf_reader";
  write_file(gguf_dir / "header_only.gguf", gguf::Writer().to_bytes());
  write_file(gguf_dir / "scalars.gguf", every_scalar());
  write_file(gguf_dir / "arrays.gguf", every_array());
  write_file(gguf_dir / "tensors.gguf", every_tensor(0));
  write_file(gguf_dir / "tensors_align64.gguf", every_tensor(64));
  std::vector<uint8_t> v2 = every_scalar();
  v2[4] = 2;  // version field: the v2 layout is the same
  write_file(gguf_dir / "version2.gguf", v2);
  write_file(gguf_dir / "spm_vocab.gguf", spm_vocab());
  write_file(gguf_dir / "bpe_vocab.gguf", bpe_vocab(""));

  const fs::path load_dir = root / "tokenizer_load";
  write_file(load_dir / "spm_vocab.gguf", spm_vocab());
  write_file(load_dir / "spm_vocab_u32_types.gguf", spm_vocab(gguf::ValueType::UINT32));
  write_file(load_dir / "spm_vocab_f32_types.gguf", spm_vocab(gguf::ValueType::FLOAT32));
  for (const std::string pre : {"gpt-2", "llama-bpe", "qwen2", "deepseek-llm", "falcon", "starcoder"}) {
    write_file(load_dir / ("bpe_vocab_" + pre + ".gguf"), bpe_vocab(pre));
  }

  for (size_t k = 0; k < kTexts.size(); ++k) {
    for (uint8_t sel = 0; sel < 4; ++sel) {
      write_text(root / "tokenizer_spm_encode" / ("text" + std::to_string(k) + "_" + std::to_string(sel)), sel,
                 kTexts[k]);
    }
    for (uint8_t sel = 0; sel < 16; sel += 3) {
      write_text(root / "tokenizer_bpe_encode" / ("text" + std::to_string(k) + "_" + std::to_string(sel)), sel,
                 kTexts[k]);
    }
  }

  // Decode seeds: selector, then (uint16 id, flags) triples; ids include BOS, byte tokens of a split UTF-8
  // character (llama-spm <0xE4><0xBD><0xA0> = 3 + byte) and an out-of-range marker (0xFFF8).
  const std::vector<std::vector<uint8_t>> id_seeds = {
      {4, 1, 0, 0, 0xE7, 0, 0, 0xC0, 0, 1, 0xA3, 0, 0},
      {0, 0x2B, 0x01, 0, 0xE7, 0, 1, 0xF8, 0xFF, 0},
      {5, 50, 0, 0, 0x20, 0x01, 0, 0x50, 0xC3, 1},
      {6, 0x01, 0x00, 0, 0x9D, 0x77, 0, 0x1D, 0x00, 1},
      {7, 0x10, 0x27, 0, 0x20, 0x4E, 1, 0x99, 0x00, 0}};
  for (size_t k = 0; k < id_seeds.size(); ++k) {
    write_file(root / "tokenizer_decode" / ("ids" + std::to_string(k)), id_seeds[k]);
  }

  // Chat seeds: FuzzedDataProvider takes strings from the front and choices from the back of the input.
  for (size_t k = 0; k < kTexts.size(); ++k) {
    const std::string s = "{% for message in messages %}<|im_start|>" + kTexts[k] + "\\n[INST]<<SYS>>" +
                          std::string(32, static_cast<char>(k * 29 + 3));
    write_file(root / "chat_template" / ("chat" + std::to_string(k)), std::vector<uint8_t>(s.begin(), s.end()));
  }

  // Jinja seeds: a selector byte (conversation, tokens, tools, kwargs, generation prompt), then a template
  // written here in the style of chat templates (statements, filters, tests, methods, whitespace control).
  const std::vector<std::string> jinja_seeds = {
      "{% for message in messages %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n{% endfor %}"
      "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
      "{{ bos_token }}{%- if tools %}{{ tools | tojson(indent=2) }}{% endif %}{%- for m in messages %}"
      "{%- if m.tool_calls %}{% for c in m.tool_calls %}{{ c.function.name }}{{ c.function.arguments | tojson }}"
      "{% endfor %}{% elif m.content is string %}{{ m.content | trim }}{% else %}{{ m.content | map(attribute='text')"
      " | join }}{% endif %}{{ eos_token }}{% endfor %}",
      "{%- set ns = namespace(sys='', n=0) %}{%- for m in messages if m.role != 'tool' %}{%- if loop.first and "
      "m.role == 'system' %}{% set ns.sys = m.content %}{% continue %}{% endif %}{% set ns.n = ns.n + 1 %}"
      "[{{ loop.index0 }}/{{ loop.length }}]{{ m.role | upper }}: {{ (m.content or '')[:20] }}{% endfor %}"
      "{{ ns.sys.strip().split('\n') }}{{ ns.n is odd }}",
      "{% macro render(m, sep=': ') %}{{ m['role'] ~ sep ~ (m['content'] if m['content'] is string else '') }}"
      "{% endmacro %}{% for m in messages[::-1] %}{{ render(m) }}{% if not loop.last %}\n{% endif %}{% endfor %}"
      "{% if enable_thinking is defined and not enable_thinking %}<think></think>{% endif %}"
      "{{ strftime_now('%d %b %Y') }}{{ raise_exception('x') if messages|length > 99 }}",
      "{% for m in messages %}{% if (m.role == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation"
      " roles must alternate') }}{% endif %}{{ '[INST] ' + m.content|string + ' [/INST]' }}{% endfor %}",
  };
  for (size_t k = 0; k < jinja_seeds.size(); ++k) {
    std::string s(1, static_cast<char>(k * 37 + 0x9C));
    s += jinja_seeds[k];
    write_file(root / "chat_jinja" / ("tmpl" + std::to_string(k)), std::vector<uint8_t>(s.begin(), s.end()));
  }

  for (size_t k = 0; k < kGbnf.size(); ++k) {
    write_file(root / "gbnf" / ("grammar" + std::to_string(k)), std::vector<uint8_t>(kGbnf[k].begin(), kGbnf[k].end()));
  }
  for (size_t k = 0; k < kSchemas.size(); ++k) {
    write_file(root / "json_schema" / ("schema" + std::to_string(k)),
               std::vector<uint8_t>(kSchemas[k].begin(), kSchemas[k].end()));
  }
  // Tool-call seeds: the row's index, then a reply in that row's shape (each row's first call syntax).
  const std::vector<std::pair<std::string, std::string>> tool_replies = {
      {"hermes", "Sure.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"s\": \"x\"}}\n</tool_call>"},
      {"qwen3-xml", "<tool_call>\n<function=f>\n<parameter=n>\n1\n</parameter>\n</function>\n</tool_call>"},
      {"glm", "<tool_call>f\n<arg_key>s</arg_key>\n<arg_value>x</arg_value>\n</tool_call>"},
      {"minimax-xml", "<minimax:tool_call>\n<invoke name=\"f\">\n<parameter name=\"s\">x</parameter>\n</invoke>\n"
                      "</minimax:tool_call>"},
      {"kimi-k2", "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{}"
                  "<|tool_call_end|><|tool_calls_section_end|>"},
      {"mistral-v11", "[TOOL_CALLS]f[ARGS]{\"n\": 2}"},
      {"gemma4", "<|tool_call>call:f{s:<|\"|>x<|\"|>,n:3,o:{k:[1,2]}}<tool_call|>"},
      {"lfm2-pythonic", "<|tool_call_start|>[f(s='x', n=3), f()]<|tool_call_end|>"},
      {"mistral-v3", "[TOOL_CALLS] [{\"name\": \"f\", \"arguments\": {}}]"},
      {"llama3-json", "{\"name\": \"f\", \"parameters\": {\"n\": 1}}"},
  };
  const auto rows = grammar::tool_formats();
  for (size_t k = 0; k < tool_replies.size(); ++k) {
    size_t index = 0;
    while (index < rows.size() && rows[index].id != tool_replies[k].first) ++index;
    std::string s(1, static_cast<char>(index));
    s += tool_replies[k].second;
    write_file(root / "tool_calls" / ("reply" + std::to_string(k)), std::vector<uint8_t>(s.begin(), s.end()));
  }
  write_requests(root / "openai_request", kOpenAICompletions, 0);
  write_requests(root / "openai_request", kOpenAIChats, 1);
  write_requests(root / "responses_request", kResponses, 0);
  write_requests(root / "anthropic_request", kAnthropic, 0);
  write_requests(root / "anthropic_request", kAnthropic, 1);
}

}  // namespace
}  // namespace preface::fuzz

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_ROOT (e.g. fuzz/corpus)\n", argv[0]);
    return 2;
  }
  try {
    preface::fuzz::write_all(argv[1]);
  } catch (const preface::Error& e) {
    std::fprintf(stderr, "fuzz_make_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
