// Which cache namespaces each tenant has used, so that DELETE /v1/cache {"tenant": T} can purge all of them.
//
// A request's namespace is Engine::cache_namespace(tenant_cache_salt(tenant, client salt)); the engine knows it
// only as that 32-byte root digest. This registry keeps, per tenant, the digests of the namespaces its requests
// used (fixed size whatever the client's salt: a client inventing long salts costs 32 bytes each). Bound: when it
// holds more than `max_entries` digests, the ones with no registered block left (Engine::live_namespaces) are
// dropped, which loses nothing a purge could still find. A namespace is noted when its request starts and again
// when it ends, so one dropped while its request was running (no block registered yet) comes back.
#pragma once
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/engine.h"

namespace preface::server {

// The engine's cache_salt for a tenant's request: an injective encoding (decimal length of the tenant, ':',
// tenant, client salt), so no client salt of one tenant equals any salt of another.
std::string tenant_cache_salt(const std::string& tenant, const std::string& client_salt);

class TenantNamespaces {
 public:
  explicit TenantNamespaces(size_t max_entries) : max_entries_(max_entries) {}

  void note(engine::Engine& engine, const std::string& tenant, const kv::Digest& ns);
  // Purges every namespace the tenant used (and forgets them). Returns the blocks purged.
  int32_t purge_tenant(engine::Engine& engine, const std::string& tenant);
  // The namespaces `tenant` has used (at most max_n, lowest digests first), for the cache explainer's siblings.
  std::vector<kv::Digest> namespaces_of(const std::string& tenant, size_t max_n) const;
  // Every namespace held, with its tenant (the admin's dashboard labels cached prefixes with it).
  std::unordered_map<kv::Digest, std::string, kv::DigestHash> owners() const;
  size_t size() const;  // digests held

 private:
  void prune(engine::Engine& engine);  // mu_ held

  const size_t max_entries_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::unordered_set<kv::Digest, kv::DigestHash>> by_tenant_;
  size_t n_entries_ = 0;
};

}  // namespace preface::server
