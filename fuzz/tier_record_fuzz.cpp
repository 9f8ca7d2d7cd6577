// Fuzz target: the KV block record decoder of the disk and Redis cache tiers (kv/tier_record.h). Input: the bytes
// of a record (a file of --cache-dir's kv/, or a Redis value). Both tiers store the same records, so this one
// target covers both.
// Checks: decode_header and decode_record never throw and never read past the input; a record is served (Ok) only
// when its header parses and names exactly what the lookup expects, and then the payload has the expected length;
// a header that parses re-encodes (uncompressed, with the decoded payload) into a record that decodes to the same
// payload. The same with a fixed tier key (sealed records, kv/record_seal.h): Ok only for a sealed header, and the
// re-encoded sealed record round-trips; without the key a sealed record is never Ok.
#include <cstdint>
#include <string>
#include <vector>

#include "kv/tier_record.h"
#include "support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace preface;
  using namespace preface::kv;
  const std::span<const uint8_t> bytes(data, size);
  const HeaderView h = decode_header(bytes);
  // Expect what the header claims (so the payload checks are reached), and a fixed other expectation.
  RecordMeta expect = h.meta;
  if (expect.payload_bytes > (1u << 20)) expect.payload_bytes = 1u << 20;
  std::vector<uint8_t> payload;
  const RecordStatus st = decode_record(bytes, expect, payload);
  if (st == RecordStatus::Ok) {
    fuzz::check(h.status == RecordStatus::Ok, "a record decoded whose header does not");
    fuzz::check(payload.size() == expect.payload_bytes, "served payload of the wrong length");
    if (expect.block_size > 0 && expect.tokens.size() == static_cast<size_t>(expect.block_size) &&
        expect.kv_type.size() < 16) {
      const auto again = encode_record(expect, payload, Compression::None);
      std::vector<uint8_t> payload2;
      fuzz::check(decode_record(again, expect, payload2) == RecordStatus::Ok && payload2 == payload,
                  "re-encoded record does not round-trip");
    }
  } else {
    fuzz::check(payload.empty(), "a rejected record left a payload");
  }
  RecordMeta other;
  other.block_size = 16;
  other.tokens.assign(16, 1);
  other.kv_type = "f16";
  other.payload_bytes = 4096;
  fuzz::check(decode_record(bytes, other, payload) != RecordStatus::Ok || h.meta.tokens == other.tokens,
              "served a record to a lookup that expects other tokens");

  static const std::string secret = "fuzz target tier key secret";
  static const RecordKey key =
      RecordKey::from_secret(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(secret.data()), secret.size()));
  const RecordStatus sealed_st = decode_record(bytes, expect, payload, &key);
  fuzz::check(sealed_st != RecordStatus::Ok || (h.status == RecordStatus::Ok && h.sealed),
              "a keyed reader served an unsealed record");
  fuzz::check(st != RecordStatus::Ok || !h.sealed, "a keyless reader served a sealed record");
  if (sealed_st == RecordStatus::Ok && expect.block_size > 0 &&
      expect.tokens.size() == static_cast<size_t>(expect.block_size) && expect.kv_type.size() < 16) {
    const auto again = encode_record(expect, payload, Compression::Zstd, &key);
    std::vector<uint8_t> payload2;
    fuzz::check(decode_record(again, expect, payload2, &key) == RecordStatus::Ok && payload2 == payload,
                "re-sealed record does not round-trip");
  }
  return 0;
}
