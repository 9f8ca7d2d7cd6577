// The vocabulary part of a GGUF (`tokenizer.ggml.*`), read and completed the way llama.cpp's
// llama_vocab::load does (model defaults, special ids, end-of-generation detection by token text, the
// special-token list), and the splitting of special-token texts out of raw text before tokenization
// (llama.cpp's tokenizer_st_partition).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gguf/reader.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"

namespace preface::tok {

// Hash that lets a std::string-keyed map be searched with a std::string_view (no temporary string).
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using PieceMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

enum class VocabModel { Spm, Bpe };

// Whitespace stripping around a special token when it is split out of text (llama.cpp's LSTRIP/RSTRIP token
// attributes, set per model by name).
enum StripFlags : uint8_t { kStripNone = 0, kStripLeft = 1, kStripRight = 2 };

// VocabTokenizer moves pieces, attrs and eog_ids into the Tokenizer base; the rest stays here.
struct Vocab {
  VocabModel model = VocabModel::Spm;
  std::string pre;               // tokenizer.ggml.pre as stored ("" when absent)
  PreTokenizerSpec pre_spec;     // BPE only
  std::vector<std::string> pieces;  // [n_vocab] token text; empty texts replaced by "[EMPTY_<id>]"
  std::vector<float> scores;        // [n_vocab] SPM merge scores, 0 when absent
  std::vector<TokenAttr> attrs;     // [n_vocab] from tokenizer.ggml.token_type, end markers forced to Control
  std::vector<uint8_t> strip;       // [n_vocab] StripFlags
  PieceMap piece_to_id;             // text -> id; for duplicate texts the highest id wins
  int32_t bos_id = -1, eos_id = -1, eot_id = -1, eom_id = -1, unk_id = -1;
  bool add_bos = false, add_eos = false, add_space_prefix = false;
  std::vector<int32_t> eog_ids;      // sorted, unique
  std::vector<int32_t> special_ids;  // Control/UserDefined/Unknown ids, longest text first (ties: lower id)
  std::vector<std::string> warnings;  // what load ignored (an out-of-range special id), for the caller to print

  int32_t find(std::string_view text) const {
    const auto it = piece_to_id.find(text);
    return it == piece_to_id.end() ? -1 : it->second;
  }
};

// One piece of the input: a special token (id >= 0) or the text bytes [offset, offset + length) (id < 0).
struct Fragment {
  int32_t id = -1;
  size_t offset = 0;
  size_t length = 0;
};

// Splits `text` at every occurrence of a special token's text. Tokens are tried longest first; each one
// splits all text fragments left by the longer ones, leftmost occurrence first, non-overlapping. Control and
// Unknown tokens take part only when parse_special is true; UserDefined tokens always do (as in llama.cpp
// and Hugging Face tokenizers). Strip flags remove ASCII whitespace next to a token. Empty text gives no
// fragments. pieces/attrs/strip: [n_vocab]; special_ids: as Vocab::special_ids.
std::vector<Fragment> split_special(std::string_view text, const std::vector<std::string>& pieces,
                                    const std::vector<TokenAttr>& attrs, const std::vector<uint8_t>& strip,
                                    const std::vector<int32_t>& special_ids, bool parse_special,
                                    std::span<const TextSpan> plain = {});

// Reads the tokenizer metadata of `file`. Throws preface::Error naming the key when something is missing,
// of the wrong type or inconsistent, and for unsupported tokenizer.ggml.model / tokenizer.ggml.pre values.
Vocab load_vocab(const gguf::File& file);

}  // namespace preface::tok
