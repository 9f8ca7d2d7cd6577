#include "kv/tier_record.h"

#include <xxhash.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>

#include "util/error.h"

namespace preface::kv {
namespace {

constexpr std::array<uint8_t, 8> kMagic = {'P', 'F', 'K', 'V', 'R', 'E', 'C', 0};
constexpr size_t kKvTypeBytes = 16;
constexpr uint32_t kMaxTokens = 1u << 16;  // a header naming more is garbage (block sizes are small)
constexpr size_t kSealedAadBytes = 192;     // a sealed record authenticates the header up to the payload checksum
constexpr uint32_t kSealAes256Gcm = 1;

// Writes little-endian fields into a buffer sized in advance.
struct Writer {
  uint8_t* p;
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) *p++ = static_cast<uint8_t>(v >> (8 * i));
  }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) *p++ = static_cast<uint8_t>(v >> (8 * i));
  }
  void raw(const void* src, size_t n) {
    if (n > 0) std::memcpy(p, src, n);
    p += n;
  }
};

uint32_t get_u32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}
uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}
Digest get_digest(const uint8_t* p) {
  Digest d;
  std::memcpy(d.bytes.data(), p, d.bytes.size());
  return d;
}

}  // namespace

Digest model_digest(std::string_view fingerprint) {
  return sha256(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(fingerprint.data()), fingerprint.size()));
}

const char* record_status_name(RecordStatus s) {
  static constexpr const char* kNames[] = {"ok",         "truncated",   "bad_magic", "version",   "header_checksum",
                                           "payload_checksum", "decompress", "other_model", "kv_layout", "mismatch",
                                           "unauthenticated"};
  static_assert(std::size(kNames) == kRecordStatusCount);
  return kNames[std::min(static_cast<size_t>(s), kRecordStatusCount - 1)];
}

size_t record_header_bytes(int32_t block_size) {
  return kRecordFixedHeaderBytes + 4 * static_cast<size_t>(std::max(block_size, 0)) + 8;
}

std::vector<uint8_t> encode_record(const RecordMeta& meta, std::span<const uint8_t> payload, Compression compression,
                                   const RecordKey* key) {
  if (payload.size() != meta.payload_bytes || meta.tokens.size() != static_cast<size_t>(meta.block_size) ||
      meta.block_size <= 0 || meta.kv_type.size() >= kKvTypeBytes) {
    throw Error("encode_record: inconsistent record metadata");
  }
  std::vector<uint8_t> stored;  // [P] the payload as stored
  std::span<const uint8_t> body = payload;
  if (compression == Compression::Zstd) {
    stored.resize(ZSTD_compressBound(payload.size()));
    const size_t n = ZSTD_compress(stored.data(), stored.size(), payload.data(), payload.size(), 1);
    if (ZSTD_isError(n)) throw Error(std::string("encode_record: zstd: ") + ZSTD_getErrorName(n));
    stored.resize(n);
    body = stored;
  }
  const size_t header_bytes = record_header_bytes(meta.block_size);
  const size_t n_token_bytes = 4 * meta.tokens.size();
  const size_t stored_bytes = key != nullptr ? kSealOverheadBytes + n_token_bytes + body.size() : body.size();
  std::vector<uint8_t> out(header_bytes + stored_bytes);
  Writer w{out.data()};
  w.raw(kMagic.data(), kMagic.size());
  w.u32(kRecordFormatVersion);
  w.u32(static_cast<uint32_t>(header_bytes));
  for (const Digest* d : {&meta.ns, &meta.hash, &meta.parent, &meta.model}) w.raw(d->bytes.data(), d->bytes.size());
  std::array<uint8_t, kKvTypeBytes> type{};
  std::memcpy(type.data(), meta.kv_type.data(), meta.kv_type.size());
  w.raw(type.data(), type.size());
  w.u32(static_cast<uint32_t>(meta.block_size));
  w.u32(static_cast<uint32_t>(meta.tokens.size()));
  w.u32(static_cast<uint32_t>(compression));
  w.u32(key != nullptr ? kSealAes256Gcm : 0);
  w.u64(payload.size());
  w.u64(stored_bytes);
  if (key == nullptr) {
    w.u64(XXH3_64bits(body.data(), body.size()));
    for (const int32_t t : meta.tokens) w.u32(static_cast<uint32_t>(t));
    w.u64(XXH3_64bits(out.data(), header_bytes - 8));
    w.raw(body.data(), body.size());
    return out;
  }
  std::vector<uint8_t> plain(n_token_bytes + body.size());
  Writer pw{plain.data()};
  for (const int32_t t : meta.tokens) pw.u32(static_cast<uint32_t>(t));
  pw.raw(body.data(), body.size());
  std::vector<uint8_t> sealed;
  sealed.reserve(stored_bytes);
  key->seal(std::span<const uint8_t>(out.data(), kSealedAadBytes), plain, sealed);
  w.u64(XXH3_64bits(sealed.data(), sealed.size()));
  w.p += n_token_bytes;  // zeros: the ids are sealed
  w.u64(XXH3_64bits(out.data(), header_bytes - 8));
  w.raw(sealed.data(), sealed.size());
  return out;
}

HeaderView decode_header(std::span<const uint8_t> bytes) {
  HeaderView h;
  if (bytes.size() < kRecordFixedHeaderBytes) return h;  // Truncated
  const uint8_t* p = bytes.data();
  if (std::memcmp(p, kMagic.data(), kMagic.size()) != 0) {
    h.status = RecordStatus::BadMagic;
    return h;
  }
  if (get_u32(p + 8) != kRecordFormatVersion) {
    h.status = RecordStatus::Version;
    return h;
  }
  const uint32_t n_tokens = get_u32(p + 164);
  const uint32_t header_bytes = get_u32(p + 12);
  if (n_tokens > kMaxTokens || header_bytes != kRecordFixedHeaderBytes + 4ull * n_tokens + 8) {
    h.status = RecordStatus::HeaderChecksum;  // a length field is corrupted
    return h;
  }
  if (bytes.size() < header_bytes) return h;  // Truncated
  if (get_u64(p + header_bytes - 8) != XXH3_64bits(p, header_bytes - 8)) {
    h.status = RecordStatus::HeaderChecksum;
    return h;
  }
  const uint32_t compression = get_u32(p + 168);
  const uint32_t sealing = get_u32(p + 172);
  if (compression > static_cast<uint32_t>(Compression::Zstd) || sealing > kSealAes256Gcm) {
    h.status = RecordStatus::Version;  // a compression or sealing this build does not know
    return h;
  }
  h.sealed = sealing == kSealAes256Gcm;
  h.meta.ns = get_digest(p + 16);
  h.meta.hash = get_digest(p + 48);
  h.meta.parent = get_digest(p + 80);
  h.meta.model = get_digest(p + 112);
  const char* type = reinterpret_cast<const char*>(p + 144);
  h.meta.kv_type.assign(type, strnlen(type, kKvTypeBytes));
  h.meta.block_size = static_cast<int32_t>(get_u32(p + 160));
  h.compression = static_cast<Compression>(compression);
  h.meta.payload_bytes = get_u64(p + 176);
  h.stored_bytes = get_u64(p + 184);
  h.payload_checksum = get_u64(p + 192);
  h.meta.tokens.resize(n_tokens);
  for (uint32_t i = 0; i < n_tokens; ++i) h.meta.tokens[i] = static_cast<int32_t>(get_u32(p + 200 + 4 * i));
  h.header_bytes = header_bytes;
  if (h.sealed) {  // the ids are checked once the payload is opened; the header must not pretend to hold them
    const bool zeros = std::all_of(h.meta.tokens.begin(), h.meta.tokens.end(), [](int32_t t) { return t == 0; });
    h.status = zeros ? RecordStatus::Ok : RecordStatus::Mismatch;
    return h;
  }
  if (chain_hash(h.meta.parent, h.meta.tokens) != h.meta.hash) {
    h.status = RecordStatus::Mismatch;
    return h;
  }
  h.status = RecordStatus::Ok;
  return h;
}

RecordStatus decode_record(std::span<const uint8_t> bytes, const RecordMeta& expect, std::vector<uint8_t>& payload,
                           const RecordKey* key) {
  payload.clear();
  const HeaderView h = decode_header(bytes);
  if (h.status != RecordStatus::Ok) return h.status;
  if (h.stored_bytes > bytes.size() || bytes.size() - h.header_bytes != h.stored_bytes) return RecordStatus::Truncated;
  if (h.meta.model != expect.model) return RecordStatus::OtherModel;
  if (h.meta.kv_type != expect.kv_type || h.meta.block_size != expect.block_size ||
      h.meta.payload_bytes != expect.payload_bytes) {
    return RecordStatus::KvLayout;
  }
  if (h.meta.ns != expect.ns || h.meta.hash != expect.hash || h.meta.parent != expect.parent ||
      (!h.sealed && h.meta.tokens != expect.tokens)) {
    return RecordStatus::Mismatch;
  }
  if (h.sealed != (key != nullptr)) return RecordStatus::Unauthenticated;
  std::span<const uint8_t> body = bytes.subspan(h.header_bytes);
  if (XXH3_64bits(body.data(), body.size()) != h.payload_checksum) return RecordStatus::PayloadChecksum;
  std::vector<uint8_t> opened;
  if (h.sealed) {
    if (!key->open(bytes.first(kSealedAadBytes), body, opened)) return RecordStatus::Unauthenticated;
    const size_t n_token_bytes = 4 * expect.tokens.size();
    if (opened.size() < n_token_bytes) return RecordStatus::Mismatch;
    for (size_t i = 0; i < expect.tokens.size(); ++i) {
      if (static_cast<int32_t>(get_u32(opened.data() + 4 * i)) != expect.tokens[i]) return RecordStatus::Mismatch;
    }
    body = std::span<const uint8_t>(opened).subspan(n_token_bytes);
  }
  if (h.compression == Compression::None) {
    if (body.size() != h.meta.payload_bytes) return RecordStatus::KvLayout;
    payload.assign(body.begin(), body.end());
    return RecordStatus::Ok;
  }
  payload.resize(h.meta.payload_bytes);
  const size_t n = ZSTD_decompress(payload.data(), payload.size(), body.data(), body.size());
  if (ZSTD_isError(n) || n != payload.size()) {
    payload.clear();
    return RecordStatus::Decompress;
  }
  return RecordStatus::Ok;
}

}  // namespace preface::kv
