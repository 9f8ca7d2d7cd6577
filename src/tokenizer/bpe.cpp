// Byte-level BPE as llama.cpp's llm_tokenizer_bpe: the text is cut into pre-tokens by the regexes of
// tokenizer.ggml.pre, each pre-token's bytes are mapped to GPT-2's printable characters, and within it the
// adjacent pair with the lowest merge rank is merged, repeatedly. SentencePiece-style vocabs (gemma4,
// PreTokenizerSpec::spm_style) skip the byte map: spaces become U+2581 first, pieces stay UTF-8, and a piece the
// vocab lacks falls back to "<0xXX>" byte tokens.
#include <queue>

#include "tokenizer/models.h"
#include "tokenizer/unicode.h"
#include "util/error.h"

namespace preface::tok {
namespace {

struct Symbol {
  int32_t prev = -1, next = -1;    // neighbours in the live chain, -1 at the ends
  size_t offset = 0, n_bytes = 0;  // span in the encoded word; n_bytes = 0 once merged into the left one
};

struct Bigram {
  int32_t left = 0, right = 0;  // symbol indices
  int32_t rank = 0;             // merge rank (index in tokenizer.ggml.merges)
  size_t n_bytes = 0;           // left + right length when queued; a mismatch later means the pair is stale
};

// Lowest rank first; on ties the leftmost pair (llama.cpp's llm_bigram_bpe::comparator).
struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

// Map key for the pair (first, second): first's length (4 bytes) + first + second, unambiguous for any texts.
void make_pair_key(std::string_view first, std::string_view second, std::string& key) {
  const auto n = static_cast<uint32_t>(first.size());
  key.assign(reinterpret_cast<const char*>(&n), sizeof(n));
  key.append(first);
  key.append(second);
}

class BpeTokenizer final : public VocabTokenizer {
 public:
  BpeTokenizer(Vocab v, const gguf::File& file)
      : VocabTokenizer(std::move(v)), splitter_(vocab_.pre_spec.regexes) {
    const gguf::Value* merges = file.find("tokenizer.ggml.merges");
    if (merges == nullptr) throw Error("tokenizer: missing metadata key tokenizer.ggml.merges (gpt2 vocab)");
    if (!merges->is_array() || merges->elem_type != gguf::ValueType::STRING) {
      throw Error("tokenizer: tokenizer.ggml.merges is not an array of strings");
    }
    ranks_.reserve(merges->strs.size());
    std::string key;
    for (size_t i = 0; i < merges->strs.size(); ++i) {
      // "first second", split at the first space after position 0 (a merge may start with a space).
      const std::string& m = merges->strs[i];
      const size_t pos = m.find(' ', 1);
      if (pos == std::string::npos) {
        make_pair_key("", "", key);
      } else {
        make_pair_key(std::string_view(m).substr(0, pos), std::string_view(m).substr(pos + 1), key);
      }
      ranks_.emplace(key, static_cast<int32_t>(i));  // the first occurrence keeps its rank
    }
    build_byte_cache();
  }

 protected:
  void encode_text(std::string_view text, bool /*after_special*/, std::vector<int32_t>& out) const override {
    std::string word, key;
    const bool spm = vocab_.pre_spec.spm_style;
    std::string escaped;
    if (spm) {
      append_escaped_spaces(text, escaped);
      text = escaped;
    }
    for (const std::string& raw : splitter_.split(text)) {
      word.clear();
      if (spm) {
        word = raw;
        if (raw.find_first_not_of('\n') == std::string::npos) {  // a run of newlines that is a token: whole
          const int32_t id = vocab_.find(word);
          if (id >= 0) {
            out.push_back(id);
            continue;
          }
        }
      } else {
        bytes_map_.encode_into(raw, word);
      }
      if (vocab_.pre_spec.ignore_merges) {
        const int32_t id = vocab_.find(word);
        if (id >= 0) {
          out.push_back(id);
          continue;
        }
      }
      merge_word(word, key, out);
    }
  }

  std::string normal_bytes(const std::string& piece) const override {
    if (vocab_.pre_spec.spm_style) return unescape_spaces(piece);
    std::string s;
    for (uint32_t cpt : decode_utf8_lenient(piece)) {
      const int b = bytes_map_.decode(cpt);
      if (b >= 0) {
        s.push_back(static_cast<char>(b));
      } else {
        append_utf8(s, cpt);  // not a byte-map character: pass it through as text
      }
    }
    return s;
  }

 private:
  int32_t rank(std::string_view first, std::string_view second, std::string& key) const {
    make_pair_key(first, second, key);
    const auto it = ranks_.find(std::string_view(key));
    return it == ranks_.end() ? -1 : it->second;
  }

  void merge_word(const std::string& word, std::string& key, std::vector<int32_t>& out) const {
    std::vector<Symbol> syms;  // [n_chars of word]
    for (size_t off = 0; off < word.size();) {
      Symbol s;
      s.offset = off;
      s.n_bytes = std::min(utf8_len(static_cast<uint8_t>(word[off])), word.size() - off);
      off += s.n_bytes;
      s.prev = static_cast<int32_t>(syms.size()) - 1;
      s.next = off == word.size() ? -1 : static_cast<int32_t>(syms.size()) + 1;
      syms.push_back(s);
    }
    const std::string_view w(word);
    auto text_of = [&](const Symbol& s) { return w.substr(s.offset, s.n_bytes); };
    std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
    auto try_add = [&](int32_t left, int32_t right) {
      if (left < 0 || right < 0) return;
      const Symbol& l = syms[static_cast<size_t>(left)];
      const Symbol& r = syms[static_cast<size_t>(right)];
      const int32_t rk = rank(text_of(l), text_of(r), key);
      if (rk >= 0) queue.push({left, right, rk, l.n_bytes + r.n_bytes});
    };
    for (size_t i = 1; i < syms.size(); ++i) try_add(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));

    while (!queue.empty()) {
      const Bigram b = queue.top();
      queue.pop();
      Symbol& l = syms[static_cast<size_t>(b.left)];
      Symbol& r = syms[static_cast<size_t>(b.right)];
      if (l.n_bytes == 0 || r.n_bytes == 0 || l.n_bytes + r.n_bytes != b.n_bytes) continue;
      l.n_bytes += r.n_bytes;
      r.n_bytes = 0;
      l.next = r.next;
      if (r.next >= 0) syms[static_cast<size_t>(r.next)].prev = b.left;
      try_add(l.prev, b.left);
      try_add(b.left, l.next);
    }

    for (int32_t i = syms.empty() ? -1 : 0; i >= 0; i = syms[static_cast<size_t>(i)].next) {
      const std::string_view piece = text_of(syms[static_cast<size_t>(i)]);
      const int32_t id = vocab_.find(piece);
      if (id >= 0) {
        out.push_back(id);
        continue;
      }
      // A merge result missing from the vocab: llama.cpp emits the tokens of its single bytes that exist ("<0xXX>"
      // tokens in a SentencePiece-style vocab).
      for (char c : piece) {
        int32_t byte_id = -1;
        if (vocab_.pre_spec.spm_style) {
          static constexpr char kHex[] = "0123456789ABCDEF";
          const auto b = static_cast<uint8_t>(c);
          const char name[6] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'};
          byte_id = vocab_.find(std::string_view(name, 6));
        } else {
          byte_id = vocab_.find(std::string_view(&c, 1));
        }
        if (byte_id >= 0) out.push_back(byte_id);
      }
    }
  }

  RegexSplitter splitter_;
  ByteMap bytes_map_;
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> ranks_;  // pair key -> merge rank
};

}  // namespace

std::unique_ptr<Tokenizer> make_bpe_tokenizer(Vocab vocab, const gguf::File& file) {
  return std::make_unique<BpeTokenizer>(std::move(vocab), file);
}

}  // namespace preface::tok
