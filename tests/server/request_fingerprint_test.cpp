// Request fingerprints for the hosted APIs' cache diagnostics: where two requests diverge, near misses named, the
// token estimate, and the store's tenant scoping and byte bound.
#include "server/api/request_fingerprint.h"

#include <gtest/gtest.h>

namespace preface::server {
namespace {

using nlohmann::ordered_json;

ordered_json base() {
  return ordered_json::parse(R"({
    "model": "m", "system": "You are terse. Today is 2026-12-03.",
    "tools": [{"name": "get_weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}],
    "messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]
  })");
}

FingerprintComparison compare(const ordered_json& a, const ordered_json& b) {
  return compare_fingerprints(fingerprint_request(a, "system", 100), fingerprint_request(b, "system", 100));
}

TEST(RequestFingerprint, AppendingMessagesDoesNotDiverge) {
  ordered_json next = base();
  next["messages"].push_back({{"role", "user"}, {"content", "More"}});
  EXPECT_EQ(compare(base(), next).where, Divergence::None);
  EXPECT_EQ(compare(base(), base()).missed_tokens, 0);
}

TEST(RequestFingerprint, EachPartAndItsNearMiss) {
  ordered_json b = base();
  b["model"] = "other";
  EXPECT_EQ(compare(base(), b).where, Divergence::Model);
  EXPECT_EQ(compare(base(), b).missed_tokens, 100);

  b = base();
  b["system"] = "You are terse.  Today is 2026-12-03.";
  FingerprintComparison c = compare(base(), b);
  EXPECT_EQ(c.where, Divergence::System);
  EXPECT_STREQ(c.near_miss, "whitespace");

  b = base();
  b["system"] = "You are terse. Today is 2026-12-04.";
  EXPECT_STREQ(compare(base(), b).near_miss, "digits");

  b = base();
  b["system"] = "You are chatty. Today is 2026-12-03.";
  EXPECT_EQ(compare(base(), b).near_miss, nullptr);

  // The same tool schema with its keys in another order.
  b = base();
  b["tools"] = ordered_json::parse(
      R"([{"input_schema": {"properties": {"city": {"type": "string"}}, "type": "object"}, "name": "get_weather"}])");
  c = compare(base(), b);
  EXPECT_EQ(c.where, Divergence::Tools);
  EXPECT_STREQ(c.near_miss, "key_order");

  b = base();
  b["messages"][1]["content"] = "Hello!";
  c = compare(base(), b);
  EXPECT_EQ(c.where, Divergence::Messages);
  // Only the second message and after are missed: fewer tokens than a system change.
  b = base();
  b["system"] = "x";
  EXPECT_LT(c.missed_tokens, compare(base(), b).missed_tokens);
  EXPECT_GT(c.missed_tokens, 0);

  b = base();
  b["messages"].erase(1);
  EXPECT_EQ(compare(base(), b).where, Divergence::Messages);  // history dropped
}

TEST(RequestFingerprint, StoreIsPerTenantAndBounded) {
  FingerprintStore store(64 * 1024);
  store.put("msg_1", "alice", fingerprint_request(base(), "system", 10));
  EXPECT_TRUE(store.get("msg_1", "alice").has_value());
  EXPECT_FALSE(store.get("msg_1", "bob").has_value());
  EXPECT_FALSE(store.get("msg_2", "alice").has_value());
  for (int i = 0; i < 2000; ++i) store.put("msg_x" + std::to_string(i), "alice", fingerprint_request(base(), "system", 1));
  EXPECT_LE(store.memory_bytes(), 64u * 1024u);
  EXPECT_FALSE(store.get("msg_1", "alice").has_value());  // the oldest went first
  EXPECT_TRUE(store.get("msg_x1999", "alice").has_value());
}

}  // namespace
}  // namespace preface::server
