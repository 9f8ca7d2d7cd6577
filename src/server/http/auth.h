// Tenancy: API keys name tenants, and the prompt cache is partitioned by tenant on the server.
//
// With keys configured (ServerOptions::api_keys), every route but GET /health, /v1/health and /metrics needs
// `Authorization: Bearer KEY` or `x-api-key: KEY`; a missing or unknown key gets 401 in the path's API shape.
// Without keys every request belongs to one shared tenant "" (and anyone may call the API).
//
// Cache namespace: the engine's cache_salt of a request is tenant_cache_salt(tenant, client cache_salt)
// (server/api/tenant_namespaces.h), so a client's cache_salt only subdivides its own tenant's cache.
//
// Purge: DELETE /v1/cache with the admin key (ServerOptions::admin_key) and {"tenant": T} purges every namespace
// T used (TenantNamespaces); with "cache_salt": S too, only T's namespace S.
#pragma once
#include <httplib.h>

#include <string>
#include <unordered_map>

#include "server/http/server.h"

namespace preface::server {

// Reads `key tenant` lines (blank lines and lines starting with '#' are skipped; a line with one field makes the
// key its own tenant). Throws preface::Error on an unreadable file, a duplicate key or an empty result.
std::unordered_map<std::string, std::string> load_api_keys(const std::string& path);


// The key a request presents: the Bearer token of Authorization, else x-api-key, else "".
std::string presented_key(const httplib::Request& req);
// The request's tenant; throws ApiError 401 when keys are configured and it presents none of them.
std::string authenticate(const ServerOptions& options, const httplib::Request& req);
// True when `key` equals the configured admin key (never when none is configured). Compares in constant time.
bool is_admin(const ServerOptions& options, const std::string& key);
// True when `key` is the metrics key or the admin key: /metrics then adds the per-tenant series.
bool may_read_tenant_metrics(const ServerOptions& options, const std::string& key);

}  // namespace preface::server
