// Fuzz target: the KV block record decoder of the disk and Redis cache tiers (kv/tier_record.h). Input: the bytes
// of a record (a file of --cache-dir's kv/, or a Redis value). Both tiers store the same records, so this one
// target covers both.
// Checks: decode_header and decode_record never throw and never read past the input; a record is served (Ok) only
// when its header parses and names exactly what the lookup expects, and then the payload has the expected length;
// a header that parses re-encodes (uncompressed, with the decoded payload) into a record that decodes to the same
// payload.
#include <cstdint>
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
  return 0;
}
