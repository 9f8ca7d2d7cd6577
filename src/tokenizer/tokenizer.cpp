#include "tokenizer/tokenizer.h"

#include <algorithm>

#include "tokenizer/models.h"
#include "tokenizer/unicode.h"
#include "util/error.h"

namespace preface {

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const gguf::File& file) {
  tok::Vocab vocab = tok::load_vocab(file);
  if (vocab.model == tok::VocabModel::Spm) return tok::make_spm_tokenizer(std::move(vocab));
  return tok::make_bpe_tokenizer(std::move(vocab), file);
}

namespace {

// The first id decode() applies the leading-space rule to: the one after a leading BOS, else the first.
size_t first_text_index(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  return !ids.empty() && tok.bos_id() >= 0 && ids[0] == tok.bos_id() ? 1 : 0;
}

}  // namespace

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  const size_t strip_at = add_space_prefix_ ? first_text_index(*this, ids) : ids.size();
  for (size_t i = 0; i < ids.size(); ++i) {
    std::string bytes = token_to_bytes(ids[i]);
    if (i == strip_at && !bytes.empty() && bytes[0] == ' ') bytes.erase(0, 1);
    out += bytes;
  }
  return out;
}

bool Tokenizer::is_end_of_generation(int32_t id) const {
  return std::binary_search(eog_ids_.begin(), eog_ids_.end(), id);
}

std::string StreamDecoder::push(int32_t id) {
  std::string bytes = tok_.token_to_bytes(id);
  if (first_) {  // the same token decode() applies the rule to: the first, or the one after a leading BOS
    if (!after_bos_ && tok_.bos_id() >= 0 && id == tok_.bos_id()) {
      after_bos_ = true;
    } else {
      if (tok_.adds_space_prefix() && !bytes.empty() && bytes[0] == ' ') bytes.erase(0, 1);
      first_ = false;
    }
  }
  pending_ += bytes;
  const size_t held = tok::incomplete_utf8_tail(pending_);
  std::string ready = pending_.substr(0, pending_.size() - held);
  pending_.erase(0, pending_.size() - held);
  return ready;
}

std::string StreamDecoder::flush() {
  std::string rest;
  rest.swap(pending_);
  return rest;
}

namespace tok {

void append_escaped_spaces(std::string_view text, std::string& out) {
  for (const char c : text) {
    if (c == ' ') {
      out += kSpaceMark;
    } else {
      out.push_back(c);
    }
  }
}

std::string unescape_spaces(std::string_view piece) {
  std::string s;
  s.reserve(piece.size());
  for (size_t i = 0; i < piece.size();) {
    if (piece.substr(i, kSpaceMark.size()) == kSpaceMark) {
      s.push_back(' ');
      i += kSpaceMark.size();
    } else {
      s.push_back(piece[i++]);
    }
  }
  return s;
}

int parse_byte_piece(std::string_view piece) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return -1;
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int hi = hex(piece[3]), lo = hex(piece[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

VocabTokenizer::VocabTokenizer(Vocab vocab) : vocab_(std::move(vocab)) {
  pieces_ = std::move(vocab_.pieces);
  attrs_ = std::move(vocab_.attrs);
  eog_ids_ = std::move(vocab_.eog_ids);
  bos_id_ = vocab_.bos_id;
  eos_id_ = vocab_.eos_id;
  eot_id_ = vocab_.eot_id;
  unk_id_ = vocab_.unk_id;
  add_bos_ = vocab_.add_bos;
  add_eos_ = vocab_.add_eos;
  add_space_prefix_ = vocab_.add_space_prefix;
  warnings_ = vocab_.warnings;
}

void VocabTokenizer::build_byte_cache() {
  bytes_.resize(pieces_.size());
  for (size_t i = 0; i < pieces_.size(); ++i) {
    const std::string& piece = pieces_[i];
    switch (attrs_[i]) {
      case TokenAttr::Normal:
        bytes_[i] = normal_bytes(piece);
        break;
      case TokenAttr::UserDefined:
        bytes_[i] = piece;
        break;
      case TokenAttr::Byte: {
        const int b = parse_byte_piece(piece);
        bytes_[i] = b >= 0 ? std::string(1, static_cast<char>(b)) : normal_bytes(piece);
        break;
      }
      case TokenAttr::Control:
      case TokenAttr::Unknown:
      case TokenAttr::Unused:
        break;  // decode to nothing
    }
  }
}

std::string VocabTokenizer::token_to_bytes(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= bytes_.size()) {
    throw Error("tokenizer: token id " + std::to_string(id) + " is outside the vocab [0, " +
                std::to_string(bytes_.size()) + ")");
  }
  return bytes_[static_cast<size_t>(id)];
}

std::vector<int32_t> VocabTokenizer::encode(std::string_view text, bool add_bos, bool parse_special,
                                            std::span<const TextSpan> plain) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (add_bos && bos_id_ >= 0) out.push_back(bos_id_);
  bool after_special = true;
  for (const Fragment& f : split_special(text, pieces_, attrs_, vocab_.strip, vocab_.special_ids, parse_special, plain)) {
    if (f.id >= 0) {
      out.push_back(f.id);
      after_special = true;
    } else {
      encode_text(text.substr(f.offset, f.length), after_special, out);
      after_special = false;
    }
  }
  return out;
}

}  // namespace tok
}  // namespace preface
