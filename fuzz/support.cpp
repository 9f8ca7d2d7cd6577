#include "support.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "gguf/writer.h"
#include "util/error.h"

namespace preface::fuzz {

MemFile::MemFile(const uint8_t* data, size_t size_bytes) {
  fd_ = ::memfd_create("fuzz-input", MFD_CLOEXEC);
  if (fd_ < 0) fail("memfd_create failed");
  size_t done_bytes = 0;
  while (done_bytes < size_bytes) {
    const ssize_t n = ::write(fd_, data + done_bytes, size_bytes - done_bytes);
    if (n <= 0) fail("write to memfd failed");
    done_bytes += static_cast<size_t>(n);
  }
  path_ = "/proc/self/fd/" + std::to_string(fd_);
}

MemFile::~MemFile() { ::close(fd_); }

std::unique_ptr<Tokenizer> load_shared_vocab(const std::string& file_name, const std::string& pre) {
  const char* env = std::getenv("PREFACE_SHARED_DIR");
  const std::filesystem::path shared =
      env != nullptr ? std::filesystem::path(env) : std::filesystem::path(PREFACE_SOURCE_DIR) / ".." / "shared";
  const std::filesystem::path path = (shared / "vocab" / file_name).lexically_normal();
  if (!std::filesystem::exists(path)) fail("vocab not found: " + path.string() + " (set PREFACE_SHARED_DIR)");
  try {
    const gguf::File file = gguf::File::open(path.string());
    if (pre.empty()) return Tokenizer::from_gguf(file);
    gguf::Writer w;
    for (const auto& [key, value] : file.metadata()) w.set_value(key, value);
    w.set_string("tokenizer.ggml.pre", pre);
    const std::vector<uint8_t> bytes = w.to_bytes();  // [file bytes]
    const MemFile mem(bytes.data(), bytes.size());
    return Tokenizer::from_gguf(gguf::File::open(mem.path()));
  } catch (const Error& e) {
    fail("cannot load " + path.string() + ": " + e.what());
  }
}

void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz check failed: %s\n", what.c_str());
  std::abort();
}

bool every_byte_has_token(const Tokenizer& tok) {
  std::array<bool, 256> seen{};
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    if (tok.attr(id) != TokenAttr::Normal && tok.attr(id) != TokenAttr::Byte) continue;
    const std::string bytes = tok.token_to_bytes(id);
    if (bytes.size() == 1) seen[static_cast<uint8_t>(bytes[0])] = true;
  }
  return std::all_of(seen.begin(), seen.end(), [](bool b) { return b; });
}

bool valid_utf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto b0 = static_cast<uint8_t>(text[i]);
    size_t len = 0;
    uint32_t cpt = 0;
    if (b0 < 0x80) {
      ++i;
      continue;
    } else if ((b0 & 0xE0) == 0xC0) {
      len = 2, cpt = b0 & 0x1F;
    } else if ((b0 & 0xF0) == 0xE0) {
      len = 3, cpt = b0 & 0x0F;
    } else if ((b0 & 0xF8) == 0xF0) {
      len = 4, cpt = b0 & 0x07;
    } else {
      return false;
    }
    if (i + len > text.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      const auto b = static_cast<uint8_t>(text[i + k]);
      if ((b & 0xC0) != 0x80) return false;
      cpt = (cpt << 6) | (b & 0x3F);
    }
    constexpr uint32_t kMinForLen[5] = {0, 0, 0x80, 0x800, 0x10000};  // smallest non-overlong value per length
    if (cpt < kMinForLen[len] || cpt > 0x10FFFF || (cpt >= 0xD800 && cpt <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

std::string escaped(std::string_view s) {
  std::string out;
  for (const char c : s) {
    const auto b = static_cast<uint8_t>(c);
    if (b >= 0x20 && b < 0x7F && c != '\\') {
      out += c;
    } else {
      char buf[5];
      std::snprintf(buf, sizeof(buf), "\\x%02X", b);
      out += buf;
    }
  }
  return out;
}

void check_encode(const Tokenizer& tok, std::string_view text, bool parse_special, bool lossless) {
  const std::vector<int32_t> ids = tok.encode(text, /*add_bos=*/true, parse_special);
  bool plain = true;  // every id after a leading BOS is a Normal or Byte token
  for (size_t k = 0; k < ids.size(); ++k) {
    const int32_t id = ids[k];
    check(id >= 0 && id < tok.n_vocab(), "encode produced id " + std::to_string(id) + " outside the vocab");
    const bool leading_bos = k == 0 && id == tok.bos_id();
    if (!leading_bos && tok.attr(id) != TokenAttr::Normal && tok.attr(id) != TokenAttr::Byte) plain = false;
  }
  check(!text.empty() || ids.size() <= 1, "empty text gave more than the BOS");

  const std::string decoded = tok.decode(ids);
  StreamDecoder stream(tok);
  std::string streamed;
  for (const int32_t id : ids) streamed += stream.push(id);
  streamed += stream.flush();
  check(streamed == decoded, "StreamDecoder gave '" + escaped(streamed) + "', decode gave '" + escaped(decoded) + "'");

  if (lossless && plain && !parse_special && valid_utf8(text)) {
    check(decoded == text, "round trip: '" + escaped(text) + "' decoded as '" + escaped(decoded) + "'");
  }
}

}  // namespace preface::fuzz
