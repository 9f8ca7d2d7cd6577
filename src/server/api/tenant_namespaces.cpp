#include "server/api/tenant_namespaces.h"

#include <algorithm>
#include <vector>

namespace preface::server {

std::string tenant_cache_salt(const std::string& tenant, const std::string& client_salt) {
  return std::to_string(tenant.size()) + ":" + tenant + client_salt;
}

void TenantNamespaces::note(engine::Engine& engine, const std::string& tenant, const kv::Digest& ns) {
  std::lock_guard lock(mu_);
  if (by_tenant_[tenant].insert(ns).second) ++n_entries_;
  if (n_entries_ > max_entries_) prune(engine);
}

void TenantNamespaces::prune(engine::Engine& engine) {
  const std::vector<kv::Digest> live_list = engine.live_namespaces();
  const std::unordered_set<kv::Digest, kv::DigestHash> live(live_list.begin(), live_list.end());
  n_entries_ = 0;
  for (auto it = by_tenant_.begin(); it != by_tenant_.end();) {
    std::erase_if(it->second, [&](const kv::Digest& d) { return !live.contains(d); });
    n_entries_ += it->second.size();
    it = it->second.empty() ? by_tenant_.erase(it) : std::next(it);
  }
}

int32_t TenantNamespaces::purge_tenant(engine::Engine& engine, const std::string& tenant) {
  std::vector<kv::Digest> roots;
  {
    std::lock_guard lock(mu_);
    const auto it = by_tenant_.find(tenant);
    if (it == by_tenant_.end()) return 0;
    roots.assign(it->second.begin(), it->second.end());
    n_entries_ -= it->second.size();
    by_tenant_.erase(it);
  }
  return engine.purge_namespaces(roots);
}

std::vector<kv::Digest> TenantNamespaces::namespaces_of(const std::string& tenant, size_t max_n) const {
  std::lock_guard lock(mu_);
  std::vector<kv::Digest> out;
  const auto it = by_tenant_.find(tenant);
  if (it == by_tenant_.end()) return out;
  out.assign(it->second.begin(), it->second.end());
  std::sort(out.begin(), out.end());  // a stable choice when there are more than max_n
  if (out.size() > max_n) out.resize(max_n);
  return out;
}

std::unordered_map<kv::Digest, std::string, kv::DigestHash> TenantNamespaces::owners() const {
  std::lock_guard lock(mu_);
  std::unordered_map<kv::Digest, std::string, kv::DigestHash> out;
  for (const auto& [tenant, set] : by_tenant_) {
    for (const kv::Digest& d : set) out.emplace(d, tenant);
  }
  return out;
}

size_t TenantNamespaces::size() const {
  std::lock_guard lock(mu_);
  return n_entries_;
}

}  // namespace preface::server
