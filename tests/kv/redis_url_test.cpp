// --cache-redis URLs: host, port, database, and credentials (user optional, percent-encoded), with the password
// masked in every error and in redact_redis_url, the form log lines print.
#include <gtest/gtest.h>

#include <string>

#include "kv/redis_tier.h"
#include "util/error.h"

namespace preface::kv {
namespace {

TEST(RedisUrl, HostPortDatabaseAndCredentials) {
  RedisAddress a = parse_redis_url("redis://127.0.0.1:6380/2");
  EXPECT_EQ(a.host, "127.0.0.1");
  EXPECT_EQ(a.port, 6380);
  EXPECT_EQ(a.db, 2);
  EXPECT_TRUE(a.password.empty());
  a = parse_redis_url("redis://:s3cret@cache.internal:7000");
  EXPECT_EQ(a.host, "cache.internal");
  EXPECT_EQ(a.port, 7000);
  EXPECT_EQ(a.user, "");
  EXPECT_EQ(a.password, "s3cret");
  a = parse_redis_url("redis://preface:p%40ss%3Aw0rd@10.0.0.5/1");  // '@' and ':' inside the password
  EXPECT_EQ(a.user, "preface");
  EXPECT_EQ(a.password, "p@ss:w0rd");
  EXPECT_EQ(a.host, "10.0.0.5");
  EXPECT_EQ(a.port, 6379);
  EXPECT_EQ(a.db, 1);
}

TEST(RedisUrl, RedissIsTls) {
  const RedisAddress a = parse_redis_url("rediss://:pw@cache.example:6380/3");
  EXPECT_TRUE(a.tls);
  EXPECT_EQ(a.host, "cache.example");
  EXPECT_EQ(a.port, 6380);
  EXPECT_EQ(a.db, 3);
  EXPECT_EQ(a.password, "pw");
  EXPECT_FALSE(parse_redis_url("redis://h:1").tls);
}

TEST(RedisUrl, RedactionMasksOnlyThePassword) {
  EXPECT_EQ(redact_redis_url("redis://:s3cret@h:1/0"), "redis://:***@h:1/0");
  EXPECT_EQ(redact_redis_url("redis://u:s3cret@h:1"), "redis://u:***@h:1");
  EXPECT_EQ(redact_redis_url("redis://h:1/0"), "redis://h:1/0");
  EXPECT_EQ(redact_redis_url("rediss://u:pw@h:1"), "rediss://u:***@h:1");
}

TEST(RedisUrl, ErrorsNeverCarryThePassword) {
  for (const char* url : {"redis://:s3cret@h:notaport", "redis://:s3cret@h:1/x", "redis://:s3cret@", "redis://u:@h",
                          "redis://:s3%zzcret@h", "rediss://:s3cret@h:x", "http://:s3cret@h"}) {
    try {
      parse_redis_url(url);
      ADD_FAILURE() << "accepted " << url;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).find("s3"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace preface::kv
