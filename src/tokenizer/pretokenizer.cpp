#include "tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cstdint>

#include "tokenizer/unicode.h"
#include "util/error.h"

namespace preface::tok {

struct RegexSplitter::Pattern {
  pcre2_code* code = nullptr;
  ~Pattern() { pcre2_code_free(code); }
};

namespace {

struct MatchData {
  explicit MatchData(const pcre2_code* code) : md(pcre2_match_data_create_from_pattern(code, nullptr)) {
    if (md == nullptr) throw Error("tokenizer: out of memory for PCRE2 match data");
  }
  ~MatchData() { pcre2_match_data_free(md); }
  MatchData(const MatchData&) = delete;
  MatchData& operator=(const MatchData&) = delete;
  pcre2_match_data* md;
};

// The text as the regexes see it: valid UTF-8 with non-ASCII whitespace replaced by '\v' and code points
// that UTF-8 cannot carry (surrogates, > 0x10FFFF) replaced by U+FFFD (same class for every pattern used).
struct Subject {
  std::string bytes;
  std::vector<size_t> cpt_to_byte;    // [n_cpts + 1] byte offset where code point i starts
  std::vector<uint32_t> byte_to_cpt;  // [bytes.size() + 1] code point index for offsets that start one
};

Subject make_subject(const std::vector<uint32_t>& cpts) {
  Subject s;
  s.bytes.reserve(cpts.size());
  s.cpt_to_byte.reserve(cpts.size() + 1);
  for (uint32_t cpt : cpts) {
    s.cpt_to_byte.push_back(s.bytes.size());
    if (cpt > 0x7F && is_unicode_whitespace(cpt)) {
      s.bytes.push_back('\v');
    } else if ((cpt >= 0xD800 && cpt <= 0xDFFF) || cpt > 0x10FFFF) {
      append_utf8(s.bytes, 0xFFFD);
    } else {
      append_utf8(s.bytes, cpt);
    }
  }
  s.cpt_to_byte.push_back(s.bytes.size());
  s.byte_to_cpt.assign(s.bytes.size() + 1, 0);
  for (size_t i = 0; i < s.cpt_to_byte.size(); ++i) s.byte_to_cpt[s.cpt_to_byte[i]] = static_cast<uint32_t>(i);
  return s;
}

}  // namespace

RegexSplitter::RegexSplitter(const std::vector<std::string>& patterns) {
  for (const auto& p : patterns) {
    int err = 0;
    PCRE2_SIZE err_off = 0;
    auto pat = std::make_unique<Pattern>();
    pat->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.data()), p.size(),
                              PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &err, &err_off, nullptr);
    if (pat->code == nullptr) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof(msg));
      throw Error("tokenizer: pre-tokenizer regex '" + p + "' does not compile at offset " +
                  std::to_string(err_off) + ": " + reinterpret_cast<const char*>(msg));
    }
    patterns_.push_back(std::move(pat));
  }
}

RegexSplitter::~RegexSplitter() = default;

std::vector<std::string> RegexSplitter::split(std::string_view text) const {
  const std::vector<uint32_t> cpts = decode_utf8_lenient(text);
  if (cpts.empty()) return {};
  const Subject subj = make_subject(cpts);

  std::vector<size_t> pieces{cpts.size()};  // lengths in code points of consecutive pieces
  for (const auto& pat : patterns_) {
    MatchData data(pat->code);
    std::vector<size_t> next;
    next.reserve(pieces.size() * 2);
    size_t first_cpt = 0;
    for (size_t n_cpts : pieces) {
      // The piece alone is the subject, so ^, $ and look-arounds see its ends (as llama.cpp's regex_iterator).
      const size_t base = subj.cpt_to_byte[first_cpt];
      const size_t len = subj.cpt_to_byte[first_cpt + n_cpts] - base;
      const auto* sub = reinterpret_cast<PCRE2_SPTR>(subj.bytes.data() + base);
      auto cpt_at = [&](size_t off) { return subj.byte_to_cpt[base + off]; };
      size_t prev_end = 0, search_from = 0;
      while (search_from < len) {
        const int rc = pcre2_match(pat->code, sub, len, search_from, PCRE2_NO_UTF_CHECK, data.md, nullptr);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
          PCRE2_UCHAR msg[256];
          pcre2_get_error_message(rc, msg, sizeof(msg));
          throw Error(std::string("tokenizer: pre-tokenizer regex failed: ") + reinterpret_cast<const char*>(msg));
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(data.md);
        const size_t m_begin = ov[0], m_end = ov[1];
        if (m_end == m_begin) {  // empty match: step over one code point (none of the shipped patterns do this)
          if (m_begin >= len) break;
          search_from = subj.cpt_to_byte[cpt_at(m_begin) + 1] - base;
          continue;
        }
        if (m_begin > prev_end) next.push_back(cpt_at(m_begin) - cpt_at(prev_end));
        next.push_back(cpt_at(m_end) - cpt_at(m_begin));
        prev_end = search_from = m_end;
      }
      if (prev_end < len) next.push_back(cpt_at(len) - cpt_at(prev_end));
      first_cpt += n_cpts;
    }
    pieces = std::move(next);
  }

  std::vector<std::string> words;
  words.reserve(pieces.size());
  size_t first_cpt = 0;
  for (size_t n_cpts : pieces) {
    std::string w;
    for (size_t i = first_cpt; i < first_cpt + n_cpts; ++i) append_utf8(w, cpts[i]);
    words.push_back(std::move(w));
    first_cpt += n_cpts;
  }
  return words;
}

}  // namespace preface::tok
