#include "tokenizer/vocab.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>

#include "util/error.h"

namespace preface::tok {
namespace {

constexpr const char* kTokens = "tokenizer.ggml.tokens";
constexpr const char* kScores = "tokenizer.ggml.scores";
constexpr const char* kTypes = "tokenizer.ggml.token_type";

// Texts llama.cpp takes as the end-of-turn token when tokenizer.ggml.eot_token_id is absent, in the order
// preferred here (llama.cpp takes whichever its hash map yields first).
constexpr std::array<std::string_view, 10> kEotTexts = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>",      "_<EOT>",     "<end_of_utterance>", "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>"};

// Texts that end generation whatever their id (llama.cpp's special_eog_ids detection).
constexpr std::array<std::string_view, 11> kEogTexts = {
    "<|eot_id|>", "<|im_end|>", "<|end|>",         "<end_of_turn>", "<|endoftext|>",      "</s>",
    "<|eom_id|>", "<EOT>",      "_<EOT>",          "<|end_of_text|>", "<end_of_utterance>"};

const gguf::Value& require_array(const gguf::File& f, const char* key) {
  const gguf::Value* v = f.find(key);
  if (v == nullptr) throw Error(std::string("tokenizer: missing metadata key ") + key);
  if (!v->is_array()) throw Error(std::string("tokenizer: metadata key ") + key + " is not an array");
  return *v;
}

// Numeric array of at least n_vocab elements, or nullptr when the key is absent.
const std::vector<double>* numeric_array(const gguf::File& f, const char* key, size_t n_vocab) {
  if (f.find(key) == nullptr) return nullptr;
  const gguf::Value& v = require_array(f, key);
  if (v.elem_type == gguf::ValueType::STRING) throw Error(std::string("tokenizer: ") + key + " holds strings");
  if (v.nums.size() < n_vocab) {
    throw Error(std::string("tokenizer: ") + key + " has " + std::to_string(v.nums.size()) +
                " entries for " + std::to_string(n_vocab) + " tokens");
  }
  return &v.nums;
}

TokenAttr attr_from_type(double type) {
  if (!(type >= 0.0 && type <= 6.0)) return TokenAttr::Unused;  // also NaN; the cast below needs a small value
  switch (static_cast<int>(type)) {
    case 1: return TokenAttr::Normal;
    case 2: return TokenAttr::Unknown;
    case 3: return TokenAttr::Control;
    case 4: return TokenAttr::UserDefined;
    case 5: return TokenAttr::Unused;
    case 6: return TokenAttr::Byte;
    // 0 (undefined) and unknown types: llama.cpp gives them no attribute, so they decode to nothing and are
    // never split out as special tokens, which is exactly how Unused behaves.
    default: return TokenAttr::Unused;
  }
}

// A special-id key overrides `id` when present and in range (llama.cpp ignores out-of-range values such as
// the 0xFFFFFFFF some converters write for "none").
// A special id outside the vocabulary is ignored (as llama.cpp does), with a warning in v.warnings.
void read_special_id(const gguf::File& f, const std::string& key, Vocab& v, int32_t& id) {
  const auto n_vocab = static_cast<int32_t>(v.pieces.size());
  if (id >= n_vocab) id = -1;
  const std::optional<int64_t> value = f.try_int(key);
  if (!value) return;
  if (*value >= 0 && *value < n_vocab) {
    id = static_cast<int32_t>(*value);
  } else {
    v.warnings.push_back(key + " = " + std::to_string(*value) + " is outside the vocabulary of " +
                         std::to_string(n_vocab) + " tokens; ignored");
  }
}

void read_pieces(const gguf::File& f, Vocab& v) {
  const gguf::Value& tokens = require_array(f, kTokens);
  if (tokens.elem_type != gguf::ValueType::STRING) throw Error("tokenizer: tokenizer.ggml.tokens is not strings");
  const size_t n = tokens.strs.size();
  if (n == 0) throw Error("tokenizer: tokenizer.ggml.tokens is empty");
  if (n > static_cast<size_t>(INT32_MAX)) throw Error("tokenizer: too many tokens");
  const std::vector<double>* scores = numeric_array(f, kScores, n);
  const std::vector<double>* types = numeric_array(f, kTypes, n);
  v.pieces.resize(n);
  v.scores.assign(n, 0.0f);
  v.attrs.assign(n, TokenAttr::Normal);
  v.strip.assign(n, kStripNone);
  v.piece_to_id.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    v.pieces[i] = tokens.strs[i].empty() ? "[EMPTY_" + std::to_string(i) + "]" : tokens.strs[i];
    v.piece_to_id[v.pieces[i]] = static_cast<int32_t>(i);
    if (scores) v.scores[i] = static_cast<float>((*scores)[i]);
    if (types) v.attrs[i] = attr_from_type((*types)[i]);
  }
}

void detect_end_tokens(Vocab& v) {
  const auto n_vocab = static_cast<int32_t>(v.pieces.size());
  if (v.eot_id < 0) {
    for (std::string_view text : kEotTexts) {
      const int32_t id = v.find(text);
      if (id >= 0) {
        v.eot_id = id;
        v.attrs[static_cast<size_t>(id)] = TokenAttr::Control;
        break;
      }
    }
  }
  for (std::string_view text : kEogTexts) {
    const int32_t id = v.find(text);
    if (id < 0) continue;
    v.eog_ids.push_back(id);
    v.attrs[static_cast<size_t>(id)] = TokenAttr::Control;
  }
  for (int32_t id : {v.eos_id, v.eot_id, v.eom_id}) {
    if (id >= 0 && id < n_vocab) v.eog_ids.push_back(id);
  }
  std::sort(v.eog_ids.begin(), v.eog_ids.end());
  v.eog_ids.erase(std::unique(v.eog_ids.begin(), v.eog_ids.end()), v.eog_ids.end());
}

void collect_special_tokens(const gguf::File& f, Vocab& v) {
  for (size_t i = 0; i < v.pieces.size(); ++i) {
    const TokenAttr a = v.attrs[i];
    if (a == TokenAttr::Control || a == TokenAttr::UserDefined || a == TokenAttr::Unknown) {
      v.special_ids.push_back(static_cast<int32_t>(i));
    }
  }
  std::stable_sort(v.special_ids.begin(), v.special_ids.end(), [&](int32_t a, int32_t b) {
    return v.pieces[static_cast<size_t>(a)].size() > v.pieces[static_cast<size_t>(b)].size();
  });

  // Per-model strip attributes, chosen by name as llama.cpp does.
  std::string name = f.try_string("general.name").value_or("");
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  auto set_strip = [&](std::string_view text, uint8_t flag, bool on) {
    const int32_t id = v.find(text);
    if (id < 0) return;
    auto& s = v.strip[static_cast<size_t>(id)];
    s = static_cast<uint8_t>(on ? (s | flag) : (s & ~flag));
  };
  if (v.pre.find("jina-v2-de") != std::string::npos || v.pre.find("jina-v2-es") != std::string::npos ||
      v.pre.find("jina-v2-code") != std::string::npos) {
    set_strip("<mask>", kStripLeft, true);
  } else if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
    for (int32_t id : v.special_ids) v.strip[static_cast<size_t>(id)] |= kStripRight;
    set_strip("</s>", kStripRight, true);
    for (std::string_view t : {"<unk>", "<s>", "<|endoftext|>"}) set_strip(t, kStripRight, false);
  }
}

}  // namespace

Vocab load_vocab(const gguf::File& file) {
  Vocab v;
  const std::optional<std::string> model = file.try_string("tokenizer.ggml.model");
  if (!model) throw Error("tokenizer: missing metadata key tokenizer.ggml.model");
  v.pre = file.try_string("tokenizer.ggml.pre").value_or("");
  if (*model == "llama") {
    v.model = VocabModel::Spm;
    v.bos_id = 1, v.eos_id = 2, v.unk_id = 0;
    v.add_bos = true;
    v.add_space_prefix = true;
  } else if (*model == "gpt2") {
    v.model = VocabModel::Bpe;
    v.pre_spec = pre_tokenizer_spec(v.pre);
    v.bos_id = 11, v.eos_id = 11;  // llama.cpp's defaults for gpt2 vocabs (Falcon's ids)
    v.add_bos = v.pre_spec.add_bos;
  } else if (*model == "gemma4") {  // llama.cpp: BPE with the gemma4 pre-tokenizer whatever the file says
    v.model = VocabModel::Bpe;
    v.pre = "gemma4";
    v.pre_spec = pre_tokenizer_spec(v.pre);
    v.add_bos = true;
  } else {
    throw Error("tokenizer: unsupported tokenizer.ggml.model '" + *model + "' (supported: llama, gpt2, gemma4)");
  }
  v.add_space_prefix = file.try_bool("tokenizer.ggml.add_space_prefix").value_or(v.add_space_prefix);

  read_pieces(file, v);
  read_special_id(file, "tokenizer.ggml.bos_token_id", v, v.bos_id);
  read_special_id(file, "tokenizer.ggml.eos_token_id", v, v.eos_id);
  read_special_id(file, "tokenizer.ggml.eot_token_id", v, v.eot_id);
  read_special_id(file, "tokenizer.ggml.eom_token_id", v, v.eom_id);
  read_special_id(file, "tokenizer.ggml.unknown_token_id", v, v.unk_id);
  v.add_bos = file.try_bool("tokenizer.ggml.add_bos_token").value_or(v.add_bos);
  if (v.pre_spec.spm_style) v.add_bos = true;  // llama.cpp overrides a false add_bos_token for gemma4
  v.add_eos = file.try_bool("tokenizer.ggml.add_eos_token").value_or(v.add_eos);
  if (v.add_bos && v.bos_id < 0) {
    throw Error("tokenizer: tokenizer.ggml.add_bos_token is true, but tokenizer.ggml.bos_token_id is not set");
  }
  if (v.add_eos && v.eos_id < 0) {
    throw Error("tokenizer: tokenizer.ggml.add_eos_token is true, but tokenizer.ggml.eos_token_id is not set");
  }
  detect_end_tokens(v);
  collect_special_tokens(file, v);
  return v;
}

namespace {

// C locale isspace: the set llama.cpp strips around LSTRIP/RSTRIP tokens.
bool is_ascii_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

bool overlaps(std::span<const TextSpan> spans, size_t offset, size_t length) {
  for (const TextSpan& s : spans) {
    if (offset < s.offset + s.length && s.offset < offset + length) return true;
  }
  return false;
}

// Splits one text fragment at every occurrence of `piece` outside the `plain` spans and appends the results to
// `out`.
void split_fragment(std::string_view text, const Fragment& frag, int32_t id, std::string_view piece,
                    uint8_t strip, std::span<const TextSpan> plain, std::vector<Fragment>& out) {
  size_t begin = frag.offset;
  const size_t end = frag.offset + frag.length;
  size_t from = begin;
  while (begin < end) {
    const size_t match = text.substr(0, end).find(piece, from);
    if (match == std::string_view::npos) break;
    if (overlaps(plain, match, piece.size())) {  // caller text: no token here, look further
      from = match + 1;
      continue;
    }
    size_t left_len = match - begin;
    if (strip & kStripLeft) {
      while (left_len > 0 && is_ascii_space(text[begin + left_len - 1])) --left_len;
    }
    if (left_len > 0) out.push_back({-1, begin, left_len});
    out.push_back({id, 0, 0});
    begin = match + piece.size();
    if (strip & kStripRight) {
      while (begin < end && is_ascii_space(text[begin])) ++begin;
    }
    from = begin;
  }
  if (begin < end) out.push_back({-1, begin, end - begin});
}

}  // namespace

std::vector<Fragment> split_special(std::string_view text, const std::vector<std::string>& pieces,
                                    const std::vector<TokenAttr>& attrs, const std::vector<uint8_t>& strip,
                                    const std::vector<int32_t>& special_ids, bool parse_special,
                                    std::span<const TextSpan> plain) {
  std::vector<Fragment> frags;
  if (text.empty()) return frags;
  frags.push_back({-1, 0, text.size()});
  std::vector<Fragment> next;
  for (int32_t id : special_ids) {
    const auto idx = static_cast<size_t>(id);
    const TokenAttr attr = attrs[idx];
    if (!parse_special && (attr == TokenAttr::Control || attr == TokenAttr::Unknown)) continue;
    const std::string_view piece = pieces[idx];
    // User-defined tokens split out even in plain spans (as with parse_special false); control tokens do not.
    const bool is_control = attr == TokenAttr::Control || attr == TokenAttr::Unknown;
    const std::span<const TextSpan> excluded = is_control ? plain : std::span<const TextSpan>();
    next.clear();
    next.reserve(frags.size() + 2);
    bool changed = false;
    for (const Fragment& f : frags) {
      if (f.id >= 0 || text.substr(f.offset, f.length).find(piece) == std::string_view::npos) {
        next.push_back(f);
        continue;
      }
      changed = true;
      split_fragment(text, f, id, piece, strip[idx], excluded, next);
    }
    if (changed) frags.swap(next);
  }
  return frags;
}

}  // namespace preface::tok
