// SentencePiece-style tokenization as llama.cpp's llm_tokenizer_spm: the text (spaces escaped to U+2581,
// optionally with a leading space) is split into UTF-8 characters, then the adjacent pair whose
// concatenation is the vocab token with the highest score is merged, repeatedly; characters that end up in
// no token are emitted as byte tokens <0xXX>.
#include <array>
#include <queue>

#include "tokenizer/models.h"
#include "tokenizer/unicode.h"
#include "util/error.h"

namespace preface::tok {
namespace {

struct Symbol {
  int32_t prev = -1, next = -1;  // neighbours in the live chain, -1 at the ends
  size_t offset = 0, n_bytes = 0;  // text span; n_bytes = 0 once merged into the left neighbour
};

struct Bigram {
  int32_t left = 0, right = 0;  // symbol indices
  float score = 0;
  size_t n_bytes = 0;  // left + right length when queued; a mismatch later means the pair is stale
};

// Highest score first; on ties the leftmost pair (llama.cpp's llm_bigram_spm::comparator).
struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

class SpmTokenizer final : public VocabTokenizer {
 public:
  explicit SpmTokenizer(Vocab v) : VocabTokenizer(std::move(v)) {
    for (int b = 0; b < 256; ++b) {
      static constexpr char kHex[] = "0123456789ABCDEF";
      const std::string hex = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'};
      int32_t id = vocab_.find(hex);
      if (id < 0) id = vocab_.find(std::string(1, static_cast<char>(b)));
      byte_ids_[static_cast<size_t>(b)] = id;
    }
    build_byte_cache();
  }

 protected:
  void encode_text(std::string_view raw, bool after_special, std::vector<int32_t>& out) const override {
    std::string text;
    text.reserve(raw.size() + 8);
    if (vocab_.add_space_prefix && after_special) text += kSpaceMark;
    append_escaped_spaces(raw, text);
    tokenize(text, out);
  }

  std::string normal_bytes(const std::string& piece) const override { return unescape_spaces(piece); }

 private:
  void tokenize(const std::string& text, std::vector<int32_t>& out) const {
    std::vector<Symbol> syms;  // [n_chars]
    for (size_t off = 0; off < text.size();) {
      Symbol s;
      s.offset = off;
      s.n_bytes = std::min(utf8_len(static_cast<uint8_t>(text[off])), text.size() - off);
      off += s.n_bytes;
      s.prev = static_cast<int32_t>(syms.size()) - 1;
      s.next = off == text.size() ? -1 : static_cast<int32_t>(syms.size()) + 1;
      syms.push_back(s);
    }
    std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
    auto try_add = [&](int32_t left, int32_t right) {
      if (left < 0 || right < 0) return;
      const Symbol& l = syms[static_cast<size_t>(left)];
      const size_t n = l.n_bytes + syms[static_cast<size_t>(right)].n_bytes;
      const int32_t id = vocab_.find(std::string_view(text).substr(l.offset, n));
      if (id < 0) return;
      queue.push({left, right, vocab_.scores[static_cast<size_t>(id)], n});
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

    // Every merged symbol is a vocab token (pairs are queued only then), so a symbol missing from the vocab is
    // a single character and falls back to its bytes (llama.cpp's resegment reduces to this).
    for (int32_t i = syms.empty() ? -1 : 0; i >= 0; i = syms[static_cast<size_t>(i)].next) {
      const Symbol& s = syms[static_cast<size_t>(i)];
      const std::string_view piece = std::string_view(text).substr(s.offset, s.n_bytes);
      const int32_t id = vocab_.find(piece);
      if (id >= 0) {
        out.push_back(id);
        continue;
      }
      for (char c : piece) out.push_back(byte_token(static_cast<uint8_t>(c)));
    }
  }

  int32_t byte_token(uint8_t b) const {
    const int32_t id = byte_ids_[b];
    if (id >= 0) return id;
    if (vocab_.unk_id >= 0) return vocab_.unk_id;
    throw Error("tokenizer: the vocab has no byte token <0x" + std::string(1, "0123456789ABCDEF"[b >> 4]) +
                std::string(1, "0123456789ABCDEF"[b & 15]) + "> and no unknown token for a character it lacks");
  }

  std::array<int32_t, 256> byte_ids_{};  // [256] id of <0xXX> (or of the 1-byte text), -1 when absent
};

}  // namespace

std::unique_ptr<Tokenizer> make_spm_tokenizer(Vocab vocab) {
  return std::make_unique<SpmTokenizer>(std::move(vocab));
}

}  // namespace preface::tok
