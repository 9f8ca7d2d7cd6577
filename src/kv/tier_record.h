// The byte format of one KV block stored outside RAM (a file of the disk tier, a value of the Redis tier): a header
// naming exactly which K/V the payload holds, then the payload (Backend::read_block's record), optionally
// zstd-compressed. Every field a reader relies on is checked before a byte of payload is served: a record that is
// torn, truncated, corrupted, of another format version, model, KV type or block size, or that names another
// namespace, parent or tokens than the lookup expects, is rejected with a reason (counted by the tiers).
//
// Layout (little-endian; offsets in bytes; n = n_tokens):
//     0   8  magic "PFKVREC\0"
//     8   4  format version (kFormatVersion)
//    12   4  header length H = 208 + 4n
//    16  32  namespace digest h_0
//    48  32  chain hash h_i
//    80  32  parent hash h_{i-1}
//   112  32  model digest: SHA-256 of the model fingerprint string
//   144  16  KV type name, zero-padded ("f16", "q8_0", ...)
//   160   4  block size (tokens)
//   164   4  n = token count (== block size)
//   168   4  compression: 0 none, 1 zstd
//   172   4  sealing: 0 none, 1 AES-256-GCM (kv/record_seal.h)
//   176   8  payload length after decompression (Backend::block_bytes)
//   184   8  stored payload length P
//   192   8  XXH3-64 of the stored payload
//   200  4n  token ids (int32)
//  200+4n 8  XXH3-64 of bytes [0, 200 + 4n)
//     H   P  payload
// A record is exactly H + P bytes; the chain hash must equal chain_hash(parent, tokens) (kv/hash.h), so the header
// cannot name tokens other than those its hash was computed from.
//
// A sealed record (written with a RecordKey) keeps the token ids out of the header (zeros there) and stores
//   P = seal(aad = header bytes [0, 192), plaintext = token ids (4n) | the payload as stored unsealed)
// so a reader without the key learns the namespace and chain hashes only, and a record not sealed under the
// reader's key (forged with recomputed checksums, edited, or unsealed where a key is configured) is rejected as
// Unauthenticated before a byte of it is used. A reader with a key accepts sealed records only; one without, unsealed
// records only.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kv/hash.h"
#include "kv/record_seal.h"

namespace preface::kv {

inline constexpr uint32_t kRecordFormatVersion = 1;
inline constexpr size_t kRecordFixedHeaderBytes = 200;  // before the token ids

// What a record says about itself (and what a lookup expects of it).
struct RecordMeta {
  Digest ns;
  Digest hash;
  Digest parent;
  Digest model;                 // SHA-256 of the model fingerprint (model_digest)
  std::string kv_type;          // at most 15 characters
  int32_t block_size = 0;
  std::vector<int32_t> tokens;  // [block_size]
  uint64_t payload_bytes = 0;   // decompressed
};

Digest model_digest(std::string_view fingerprint);

enum class RecordStatus : uint8_t {
  Ok,
  Truncated,        // shorter (or longer) than its header says, or shorter than a header
  BadMagic,         // not a record
  Version,          // another format version
  HeaderChecksum,   // header bytes corrupted
  PayloadChecksum,  // payload bytes corrupted
  Decompress,       // zstd failed or gave another length
  OtherModel,       // written by another model file
  KvLayout,         // another KV type, block size or payload size
  Mismatch,         // namespace, chain hash, parent or tokens differ from the lookup's (or hash != chain(parent, tokens))
  Unauthenticated,  // not sealed under the reader's key (or sealed where the reader has none)
  kCount,
};
inline constexpr size_t kRecordStatusCount = static_cast<size_t>(RecordStatus::kCount);
const char* record_status_name(RecordStatus s);  // "ok" | "truncated" | "bad_magic" | ... | "unauthenticated"

enum class Compression : uint32_t { None = 0, Zstd = 1 };

// meta + payload as a record, sealed under key when it is not null. payload.size() must equal meta.payload_bytes
// and meta.tokens.size() meta.block_size; throws preface::Error otherwise or when zstd or sealing fails.
std::vector<uint8_t> encode_record(const RecordMeta& meta, std::span<const uint8_t> payload, Compression compression,
                                   const RecordKey* key = nullptr);

// The header alone (bytes may be a prefix of the record; at least header_bytes_needed). Checks magic, version,
// header length and checksum; fills meta (payload_bytes included) and the stored payload length.
struct HeaderView {
  RecordStatus status = RecordStatus::Truncated;
  RecordMeta meta;
  uint32_t header_bytes = 0;
  uint64_t stored_bytes = 0;
  Compression compression = Compression::None;
  bool sealed = false;  // meta.tokens are then zeros: the ids are inside the sealed payload
  uint64_t payload_checksum = 0;
};
HeaderView decode_header(std::span<const uint8_t> bytes);
// Bytes to read to see the whole header of a record of a block_size-token block.
size_t record_header_bytes(int32_t block_size);

// A whole record checked against `expect` (every field of RecordMeta), opened with key when it is not null. On
// Ok, payload holds the decompressed payload ([expect.payload_bytes]); otherwise it is empty. Never throws on any
// input bytes.
RecordStatus decode_record(std::span<const uint8_t> bytes, const RecordMeta& expect, std::vector<uint8_t>& payload,
                           const RecordKey* key = nullptr);

}  // namespace preface::kv
