// The Responses API's store (server/api/response_store.h): per-tenant visibility, the count and byte bounds
// (oldest dropped first), expiry, replacement and erase.
#include "server/api/response_store.h"

#include <gtest/gtest.h>

#include <thread>

namespace preface::server {
namespace {

std::shared_ptr<StoredResponse> entry(const std::string& id, size_t n_tokens = 0) {
  auto r = std::make_shared<StoredResponse>();
  r->id = id;
  r->response = {{"id", id}};
  r->prompt_tokens.assign(n_tokens, 7);
  return r;
}

TEST(ResponseStore, EntriesAreVisibleToTheirTenantOnly) {
  ResponseStore store(10, 1 << 20, std::chrono::seconds(60));
  ASSERT_TRUE(store.put("alice", entry("resp_1")));
  EXPECT_NE(store.get("alice", "resp_1"), nullptr);
  EXPECT_EQ(store.get("bob", "resp_1"), nullptr);
  EXPECT_FALSE(store.erase("bob", "resp_1"));
  EXPECT_NE(store.get("alice", "resp_1"), nullptr);
  EXPECT_TRUE(store.erase("alice", "resp_1"));
  EXPECT_EQ(store.get("alice", "resp_1"), nullptr);
  EXPECT_EQ(store.stats().n_entries, 0u);
  EXPECT_EQ(store.stats().bytes, 0u);
}

TEST(ResponseStore, CountAndBytesAreBoundedOldestFirst) {
  ResponseStore by_count(3, 1 << 20, std::chrono::seconds(60));
  for (int i = 0; i < 5; ++i) by_count.put("t", entry("resp_" + std::to_string(i)));
  EXPECT_EQ(by_count.stats().n_entries, 3u);
  EXPECT_EQ(by_count.get("t", "resp_0"), nullptr);
  EXPECT_EQ(by_count.get("t", "resp_1"), nullptr);
  EXPECT_NE(by_count.get("t", "resp_4"), nullptr);
  EXPECT_EQ(by_count.stats().n_dropped, 2);

  const size_t one = stored_response_bytes(*entry("resp_a", 1000));
  ResponseStore by_bytes(100, 2 * one + one / 2, std::chrono::seconds(60));
  for (const char* id : {"resp_a", "resp_b", "resp_c"}) by_bytes.put("t", entry(id, 1000));
  EXPECT_EQ(by_bytes.stats().n_entries, 2u);
  EXPECT_LE(by_bytes.stats().bytes, 2 * one + one / 2);
  EXPECT_EQ(by_bytes.get("t", "resp_a"), nullptr);
  EXPECT_FALSE(by_bytes.put("t", entry("resp_huge", 1 << 20)));  // larger than the whole store
  EXPECT_NE(by_bytes.get("t", "resp_c"), nullptr);

  by_bytes.put("t", entry("resp_b", 10));  // a replacement counts once
  EXPECT_EQ(by_bytes.stats().n_entries, 2u);
  EXPECT_EQ(by_bytes.stats().bytes, stored_response_bytes(*entry("resp_b", 10)) + one);
}

TEST(ResponseStore, EntriesExpire) {
  ResponseStore store(10, 1 << 20, std::chrono::seconds(0));
  store.put("t", entry("resp_1"));
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_EQ(store.get("t", "resp_1"), nullptr);
  EXPECT_EQ(store.stats().n_entries, 0u);
  EXPECT_EQ(store.stats().bytes, 0u);
}

}  // namespace
}  // namespace preface::server
