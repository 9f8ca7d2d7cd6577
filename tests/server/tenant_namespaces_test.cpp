// TenantNamespaces: a tenant's purge reaches every namespace it used and no other tenant's; the registry holds
// fixed-size digests and stays bounded however many salts clients invent (issue 28: 200 distinct 1 MiB salts once
// held 234 MiB of engine state).
#include <gtest/gtest.h>

#include "engine/engine_harness.h"
#include "server/api/tenant_namespaces.h"

namespace preface::test {
namespace {

int32_t run_cached(engine::Engine& eng, const std::string& salt, int32_t offset) {
  engine::RequestParams p;
  for (int32_t i = 0; i < 48; ++i) p.prompt.push_back(1 + (i * 5 + offset) % 300);
  p.max_new_tokens = 1;
  p.cache_salt = salt;
  auto s = eng.submit(std::move(p));
  eng.run_until_idle();
  return collect(*s).stats.n_cached_tokens;
}

engine::EngineConfig small() {
  engine::EngineConfig c;
  c.kv_cache_bytes = 256ull * 16 * 640;  // 256 blocks of stories260K f16
  c.n_threads = 1;
  return c;
}

TEST(TenantNamespaces, PurgeTenantReachesEveryNamespaceItUsedAndNoOther) {
  LoadedModel lm = load_shared_model("stories260K.gguf");
  ASSERT_TRUE(lm.model) << "needs ../shared/models/stories260K.gguf";
  engine::Engine eng(*lm.model, engine::with_eog(small(), *lm.tokenizer));
  server::TenantNamespaces reg(1000);
  auto use = [&](const std::string& tenant, const std::string& salt) {
    const std::string s = server::tenant_cache_salt(tenant, salt);
    reg.note(eng, tenant, eng.cache_namespace(s));
    return run_cached(eng, s, 7);
  };
  for (const char* salt : {"", "x", "y"}) EXPECT_EQ(use("alice", salt), 0);
  EXPECT_EQ(use("bob", ""), 0);
  EXPECT_GT(use("alice", "x"), 0);
  EXPECT_GT(reg.purge_tenant(eng, "alice"), 0);
  for (const char* salt : {"", "x", "y"}) EXPECT_EQ(use("alice", salt), 0) << "purged: '" << salt << "'";
  EXPECT_GT(use("bob", ""), 0) << "another tenant's namespace survives";
  EXPECT_EQ(reg.purge_tenant(eng, "nobody"), 0);
  EXPECT_NO_THROW(eng.check_invariants());
}

TEST(TenantNamespaces, BoundedByLiveNamespacesWhateverTheSalts) {
  LoadedModel lm = load_shared_model("stories260K.gguf");
  ASSERT_TRUE(lm.model) << "needs ../shared/models/stories260K.gguf";
  engine::Engine eng(*lm.model, engine::with_eog(small(), *lm.tokenizer));
  server::TenantNamespaces reg(64);
  // 2,000 distinct 64 KiB salts with no cached block behind them: the registry keeps at most its bound.
  for (int i = 0; i < 2000; ++i) {
    const std::string salt = server::tenant_cache_salt("mallory", std::string(64 << 10, 'a') + std::to_string(i));
    reg.note(eng, "mallory", eng.cache_namespace(salt));
    ASSERT_LE(reg.size(), 65u);
  }
  // Namespaces that hold blocks are never dropped: a purge still finds them.
  const std::string keep = server::tenant_cache_salt("mallory", "kept");
  reg.note(eng, "mallory", eng.cache_namespace(keep));
  EXPECT_EQ(run_cached(eng, keep, 3), 0);
  for (int i = 0; i < 500; ++i) reg.note(eng, "mallory", eng.cache_namespace("junk" + std::to_string(i)));
  EXPECT_GT(reg.purge_tenant(eng, "mallory"), 0);
  EXPECT_EQ(run_cached(eng, keep, 3), 0) << "the kept namespace was purged with its tenant";
}

}  // namespace
}  // namespace preface::test
