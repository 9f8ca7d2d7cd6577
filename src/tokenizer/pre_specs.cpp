// The pre-tokenizer regexes llama.cpp (llm_tokenizer_bpe) uses per tokenizer.ggml.pre value. Non-ASCII
// characters are written as \x{...} so the code points are exact (several of them change under Unicode
// normalization, e.g. U+212A KELVIN SIGN -> 'K', which would turn a range into a different one).
#include <algorithm>
#include <array>
#include <string_view>

#include "tokenizer/pretokenizer.h"
#include "util/error.h"

namespace preface::tok {
namespace {

// GPT-2's regex. llama.cpp lists it without the final "|\s+" but runs it through a hand-written matcher
// (unicode_regex_split_custom_gpt2) that does include that alternative, so it is spelled out here.
constexpr const char* kGpt2 =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

// Llama 3's regex with the case-insensitive contractions spelled out (llama.cpp's form).
constexpr const char* kLlama3 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

constexpr const char* kQwen2 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// Qwen 3.5's: Qwen2's with combining marks (\p{M}) inside words and out of the punctuation runs.
constexpr const char* kQwen35 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}"
    "| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// Cased letters (Lu/Ll/Lt ranges as listed in DeepSeek's tokenizer.json), optionally after one whitespace.
constexpr const char* kDeepseekLetters =
    "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{1C4}-\\x{293}"
    "\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}\\x{386}"
    "\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}"
    "\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}"
    "\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}"
    "\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}"
    "\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}"
    "\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}"
    "\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}"
    "\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}"
    "\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}"
    "\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}"
    "\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}"
    "\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}"
    "\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}"
    "\\x{1E900}-\\x{1E943}]+";

// CJK ideographs (U+4E00-U+9FA5), U+0800-U+4E00 and Hangul (U+AC00-U+D7FF).
constexpr const char* kDeepseekCjk = "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+";

// " ?[^(\s|.,!?…。，、।۔،)]+" (BLOOM / Poro / Viking).
constexpr const char* kPoro =
    " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{964}\\x{6D4}\\x{60C})]+";

struct Entry {
  std::array<std::string_view, 5> names;  // tokenizer.ggml.pre values mapping to this type (empty = unused)
  PreTokenizerSpec spec;
};

std::vector<Entry> make_table() {
  std::vector<Entry> t;
  t.push_back({{"default"}, {"default", {"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2, "\\p{N}+", "[0-9][0-9][0-9]"}}});
  t.push_back({{"llama3", "llama-v3", "llama-bpe", "falcon3"}, {"llama3", {kLlama3}, true, true}});
  t.push_back({{"dbrx", "smaug-bpe"}, {"dbrx", {kLlama3}}});
  t.push_back({{"deepseek-llm"},
               {"deepseek-llm",
                {"[\r\n]", kDeepseekLetters,
                 "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+",
                 "\\s+$", kDeepseekCjk, "\\p{N}+"}}});
  t.push_back({{"deepseek-coder"},
               {"deepseek-coder", {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", kDeepseekCjk, "\\p{N}"}}});
  t.push_back({{"falcon"}, {"falcon", {"[\\p{P}\\$\\+<=>\\^~\\|`]+", kGpt2, "[0-9][0-9][0-9]"}}});
  t.push_back({{"starcoder", "refact", "command-r", "smollm", "codeshell"}, {"starcoder", {"\\p{N}", kGpt2}}});
  t.push_back({{"exaone", "minerva-7b"}, {"starcoder", {"\\p{N}", kGpt2}}});
  t.push_back({{"gpt-2", "phi-2", "mpt", "olmo", "jais"}, {"gpt2", {kGpt2}}});
  t.push_back({{"jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de"}, {"gpt2", {kGpt2}}});
  t.push_back({{"qwen2", "deepseek-r1-qwen", "stablelm2", "megrez"}, {"qwen2", {kQwen2}}});
  t.push_back({{"qwen35"}, {"qwen35", {kQwen35}}});
  t.push_back({{"poro-chat", "bloom", "gpt3-finnish"}, {"poro", {kPoro}}});
  t.push_back({{"viking"}, {"viking", {kPoro, "\\p{N}"}}});
  t.push_back({{"tekken"},
               {"tekken",
                {"[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+"
                 "|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*"
                 "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
                true, true}});
  t.push_back({{"chameleon"},
               {"chameleon",
                {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )", "\\p{N}",
                 "[\\p{P}!-/:-@\\[-`{-~]", kGpt2},
                 false, true}});
  t.push_back({{"gemma4"}, {"gemma4", {"[^\\n]+|[\\n]+"}, false, true, true}});
  t.push_back({{"gpt-4o", "llama4"},
               {"gpt-4o",
                {"[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+"
                 "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?"
                 "|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*"
                 "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?"
                 "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}}});
  return t;
}

}  // namespace

PreTokenizerSpec pre_tokenizer_spec(const std::string& pre) {
  const std::string name = pre.empty() ? "default" : pre;
  const std::vector<Entry> table = make_table();
  std::string supported;
  for (const auto& e : table) {
    for (std::string_view n : e.names) {
      if (n.empty()) continue;
      if (n == name) return e.spec;
      supported += supported.empty() ? "" : ", ";
      supported += n;
    }
  }
  throw Error("tokenizer: unsupported tokenizer.ggml.pre '" + pre + "' for a gpt2 (byte-level BPE) vocab; " +
              "supported: " + supported);
}

}  // namespace preface::tok
