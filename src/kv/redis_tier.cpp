#include "kv/redis_tier.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <charconv>
#include <cstdio>

#include "util/error.h"

namespace preface::kv {
namespace {

struct ReplyFree {
  void operator()(redisReply* r) const {
    if (r != nullptr) freeReplyObject(r);
  }
};
using Reply = std::unique_ptr<redisReply, ReplyFree>;

timeval to_timeval(int ms) { return timeval{ms / 1000, static_cast<suseconds_t>((ms % 1000) * 1000)}; }

int parse_int(std::string_view s, const std::string& url, const char* what) {
  int v = -1;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < 0) {
    throw Error("--cache-redis " + redact_redis_url(url) + ": " + what + " is not a number");
  }
  return v;
}

// %XX escapes decoded; a malformed escape is an error.
std::string percent_decode(std::string_view s, const std::string& url) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    int v = 0;
    const bool whole = i + 3 <= s.size();
    const auto [end, ec] = whole ? std::from_chars(s.data() + i + 1, s.data() + i + 3, v, 16)
                                 : std::from_chars_result{s.data(), std::errc::invalid_argument};
    if (!whole || ec != std::errc() || end != s.data() + i + 3) {
      throw Error("--cache-redis " + redact_redis_url(url) + ": a malformed %-escape in the user or password");
    }
    out += static_cast<char>(v);
    i += 2;
  }
  return out;
}

constexpr std::string_view kScheme = "redis://";
constexpr std::string_view kTlsScheme = "rediss://";

// AUTH (when the address has a password) and SELECT on a fresh connection; "" when both succeed, else the server's
// error (or "no reply").
std::string prepare(redisContext* c, const RedisAddress& a) {
  const auto error_of = [](const Reply& r) -> std::string {
    if (!r) return "no reply";
    return r->type == REDIS_REPLY_ERROR ? std::string(r->str, r->len) : std::string();
  };
  if (!a.password.empty()) {
    Reply r(static_cast<redisReply*>(
        a.user.empty() ? redisCommand(c, "AUTH %b", a.password.data(), a.password.size())
                       : redisCommand(c, "AUTH %b %b", a.user.data(), a.user.size(), a.password.data(),
                                      a.password.size())));
    if (std::string e = error_of(r); !e.empty()) return e;
  }
  if (a.db != 0) {
    Reply r(static_cast<redisReply*>(redisCommand(c, "SELECT %d", a.db)));
    if (std::string e = error_of(r); !e.empty()) return e;
  }
  Reply r(static_cast<redisReply*>(redisCommand(c, "PING")));  // NOAUTH here when a password is required
  return error_of(r);
}

// A connection (over TLS for rediss://, its relay in *tls) with its timeout set and prepared; nullptr with *why
// set otherwise.
redisContext* connect_prepared(const RedisAddress& a, const RedisTlsOptions& tls_options, int timeout_ms,
                               std::unique_ptr<RedisTlsLink>* tls, std::string* why) {
  redisContext* c = nullptr;
  if (a.tls) {
    *tls = RedisTlsLink::open(a.host, a.port, tls_options, timeout_ms, why);
    if (!*tls) return nullptr;
    c = redisConnectFd((*tls)->release_client_fd());
  } else {
    c = redisConnectWithTimeout(a.host.c_str(), a.port, to_timeval(timeout_ms));
  }
  *why = c == nullptr ? "cannot allocate a connection" : c->err != 0 ? std::string(c->errstr) : "";
  if (why->empty() && redisSetTimeout(c, to_timeval(timeout_ms)) != REDIS_OK) *why = "cannot set the timeout";
  if (why->empty()) *why = prepare(c, a);
  if (why->empty()) return c;
  if (c != nullptr) redisFree(c);
  tls->reset();  // after redisFree closed hiredis's end, so the relay has ended
  return nullptr;
}

// Whether a server error refuses the credentials (rather than the connection or a command failing).
bool refuses_credentials(const std::string& error) {
  for (const char* prefix : {"WRONGPASS", "NOAUTH", "ERR AUTH", "ERR invalid password", "NOPERM"}) {
    if (error.starts_with(prefix)) return true;
  }
  return false;
}

}  // namespace

std::string redact_redis_url(const std::string& url) {
  const size_t start = url.find("://") == std::string::npos ? 0 : url.find("://") + 3;
  const size_t at = url.rfind('@');
  if (at == std::string::npos || at < start) return url;
  const size_t colon = url.find(':', start);
  if (colon == std::string::npos || colon > at) return url;  // a user without a password
  return url.substr(0, colon + 1) + "***" + url.substr(at);
}

RedisAddress parse_redis_url(const std::string& url) {
  const bool tls = url.starts_with(kTlsScheme);
  if (!tls && !url.starts_with(kScheme)) {
    throw Error("--cache-redis " + redact_redis_url(url) +
                ": expected redis://[[user]:password@]host:port[/db] (rediss:// for TLS)");
  }
  std::string_view rest = std::string_view(url).substr(tls ? kTlsScheme.size() : kScheme.size());
  RedisAddress a;
  a.tls = tls;
  if (const size_t at = rest.rfind('@'); at != std::string_view::npos) {
    const std::string_view userinfo = rest.substr(0, at);
    rest = rest.substr(at + 1);
    const size_t colon = userinfo.find(':');
    a.user = percent_decode(userinfo.substr(0, colon), url);
    if (colon != std::string_view::npos) a.password = percent_decode(userinfo.substr(colon + 1), url);
    if (a.password.empty()) {
      throw Error("--cache-redis " + redact_redis_url(url) + ": credentials without a password");
    }
  }
  if (const size_t slash = rest.find('/'); slash != std::string_view::npos) {
    a.db = parse_int(rest.substr(slash + 1), url, "the database");
    rest = rest.substr(0, slash);
  }
  if (const size_t colon = rest.rfind(':'); colon != std::string_view::npos) {
    a.port = parse_int(rest.substr(colon + 1), url, "the port");
    if (a.port < 1 || a.port > 65535) throw Error("--cache-redis " + redact_redis_url(url) + ": port out of range");
    rest = rest.substr(0, colon);
  }
  if (rest.empty()) throw Error("--cache-redis " + redact_redis_url(url) + ": no host");
  a.host = std::string(rest);
  return a;
}

std::string redis_key(const Digest& ns, const Digest& hash) {
  return "preface:kv:v1:" + to_hex(ns) + ":" + to_hex(hash);
}

redisContext* RedisTier::Connection::get(int64_t* n_errors) {
  if (ctx_ != nullptr) return ctx_;
  const auto now = std::chrono::steady_clock::now();
  if (now < retry_at_ && !tier_.up()) return nullptr;  // the other connection got through: try now
  std::string why;
  ctx_ = connect_prepared(addr_, tier_.opt_.tls, timeout_ms_, &tls_, &why);
  if (ctx_ == nullptr) {
    ++*n_errors;
    back_off(why);
    return nullptr;
  }
  tier_.mark(true, "");
  return ctx_;
}

void RedisTier::Connection::back_off(const std::string& why) {
  tier_.mark(false, why);
  backoff_ = std::clamp(backoff_ * 2, std::chrono::milliseconds(100), max_backoff_);
  retry_at_ = std::chrono::steady_clock::now() + backoff_;
}

RedisTier::Connection::~Connection() {
  if (ctx_ != nullptr) redisFree(ctx_);
  tls_.reset();
}

void RedisTier::Connection::drop() {
  if (ctx_ != nullptr) redisFree(ctx_);
  ctx_ = nullptr;
  tls_.reset();
  back_off("a command failed or timed out");
}

RedisTier::RedisTier(RedisTierOptions options)
    : opt_(std::move(options)),
      addr_(parse_redis_url(opt_.url)),
      lookup_(*this, addr_, opt_.timeout_ms, std::chrono::milliseconds(5000)),
      writer_(*this, addr_, opt_.timeout_ms, std::chrono::milliseconds(500)),
      queue_(opt_.max_queue_bytes, [this](const TierWrite& w) { write(w); }) {
  // A server that answers but refuses the credentials is a start-up error, not a tier that silently writes nothing.
  if (addr_.tls) {  // unreadable certificate files are a start-up error, not a tier that never connects
    if (const std::string bad = check_redis_tls_options(opt_.tls); !bad.empty()) {
      throw Error("--cache-redis " + redact_redis_url(opt_.url) + ": " + bad);
    }
  }
  std::string why;
  std::unique_ptr<RedisTlsLink> tls;
  if (redisContext* c = connect_prepared(addr_, opt_.tls, opt_.timeout_ms, &tls, &why)) {
    redisFree(c);
    tls.reset();
  } else if (refuses_credentials(why)) {
    throw Error("--cache-redis " + redact_redis_url(opt_.url) + ": the server refused the credentials: " + why);
  } else {
    mark(false, why);
  }
  stats_.name = "redis";
  stats_.n_records = -1;
  stats_.n_stored_bytes = -1;
}

RedisTier::~RedisTier() { queue_.stop(); }

void RedisTier::count(int64_t TierStats::*field, int64_t n) {
  std::lock_guard lock(mu_);
  stats_.*field += n;
}

std::vector<std::vector<uint8_t>> RedisTier::fetch(std::span<const RecordMeta> expect) {
  std::vector<std::vector<uint8_t>> out;
  if (expect.empty()) return out;
  const auto t0 = std::chrono::steady_clock::now();
  int64_t n_errors = 0, n_read = 0;
  std::array<int64_t, kRecordStatusCount> rejected{};
  // Records written a moment ago and still queued are served from the queue (same process).
  while (out.size() < expect.size()) {
    RecordMeta queued;
    const RecordMeta& want = expect[out.size()];
    auto p = queue_.pending(want.hash, &queued);
    if (!p || queued.ns != want.ns || queued.parent != want.parent || queued.tokens != want.tokens ||
        p->size() != want.payload_bytes) {
      break;
    }
    out.push_back(*p);
  }
  const auto rest = expect.subspan(out.size());
  if (redisContext* c = rest.empty() ? nullptr : lookup_.get(&n_errors)) {
    bool io_ok = true;
    for (const RecordMeta& want : rest) {
      const std::string key = redis_key(want.ns, want.hash);
      io_ok = io_ok && redisAppendCommand(c, "GET %b", key.data(), key.size()) == REDIS_OK;
    }
    bool gap = false;  // the chain is usable up to its first absent or rejected block; every reply is still read
    for (size_t i = 0; io_ok && i < rest.size(); ++i) {
      void* raw = nullptr;
      if (redisGetReply(c, &raw) != REDIS_OK) {
        io_ok = false;
        break;
      }
      Reply r(static_cast<redisReply*>(raw));
      if (gap) continue;
      if (r->type == REDIS_REPLY_ERROR) ++n_errors;
      if (r->type != REDIS_REPLY_STRING) {
        gap = true;
        continue;
      }
      n_read += static_cast<int64_t>(r->len);
      std::vector<uint8_t> payload;
      const RecordStatus s = decode_record(
          std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(r->str), r->len), rest[i], payload, opt_.key.get());
      if (s != RecordStatus::Ok) {
        ++rejected[static_cast<size_t>(s)];
        gap = true;
        continue;
      }
      out.push_back(std::move(payload));
    }
    if (!io_ok) {  // a timeout or a broken connection: replies may still be in flight, so the connection goes
      ++n_errors;
      lookup_.drop();
    } else {
      lookup_.ok();
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::lock_guard lock(mu_);
  stats_.n_lookup_blocks += static_cast<int64_t>(expect.size());
  stats_.n_hit_blocks += static_cast<int64_t>(out.size());
  stats_.n_miss_blocks += static_cast<int64_t>(expect.size() - out.size());
  stats_.n_read_bytes += n_read;
  stats_.n_errors += n_errors;
  for (size_t i = 0; i < kRecordStatusCount; ++i) stats_.n_rejected[i] += rejected[i];
  if (!out.empty()) {
    ++stats_.n_fetches;
    stats_.fetch_seconds += seconds;
  }
  return out;
}

void RedisTier::offer(const RecordMeta& meta, std::shared_ptr<const std::vector<uint8_t>> payload) {
  if (!queue_.push(TierWrite{meta, std::move(payload), std::nullopt})) count(&TierStats::n_dropped_writes);
}

void RedisTier::purge_namespace(const Digest& ns) {
  queue_.drop_namespace(ns);  // no point writing what the queued purge deletes
  if (!queue_.push(TierWrite{{}, nullptr, ns})) count(&TierStats::n_dropped_writes);
}

void RedisTier::write(const TierWrite& w) {
  int64_t n_errors = 0;
  redisContext* c = writer_.get(&n_errors);
  if (c == nullptr) {
    count(&TierStats::n_errors, n_errors);
    count(&TierStats::n_dropped_writes);
    return;
  }
  if (w.purge_ns) {  // SCAN the namespace's keys and DEL them, a batch at a time
    const std::string pattern = "preface:kv:v1:" + to_hex(*w.purge_ns) + ":*";
    std::string cursor = "0";
    do {
      Reply r(static_cast<redisReply*>(redisCommand(c, "SCAN %s MATCH %s COUNT 1000", cursor.c_str(), pattern.c_str())));
      if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
        count(&TierStats::n_errors);
        if (!r) writer_.drop();
        return;
      }
      cursor.assign(r->element[0]->str, r->element[0]->len);
      for (size_t i = 0; i < r->element[1]->elements; ++i) {
        const redisReply* k = r->element[1]->element[i];
        Reply d(static_cast<redisReply*>(redisCommand(c, "DEL %b", k->str, k->len)));
        if (!d) {
          count(&TierStats::n_errors);
          writer_.drop();
          return;
        }
      }
    } while (cursor != "0");
    return;
  }
  std::vector<uint8_t> record;
  try {
    record = encode_record(w.meta, *w.payload, opt_.compression, opt_.key.get());
  } catch (const std::exception&) {
    count(&TierStats::n_errors);
    return;
  }
  if (record.size() > opt_.max_record_bytes) {
    count(&TierStats::n_dropped_writes);
    return;
  }
  const std::string key = redis_key(w.meta.ns, w.meta.hash);
  Reply r;
  if (opt_.ttl_s > 0) {
    r.reset(static_cast<redisReply*>(redisCommand(c, "SET %b %b PX %lld", key.data(), key.size(), record.data(),
                                                  record.size(), static_cast<long long>(opt_.ttl_s) * 1000)));
  } else {
    r.reset(static_cast<redisReply*>(
        redisCommand(c, "SET %b %b", key.data(), key.size(), record.data(), record.size())));
  }
  if (!r) {  // I/O error or timeout
    count(&TierStats::n_errors);
    count(&TierStats::n_dropped_writes);
    writer_.drop();
    return;
  }
  writer_.ok();
  if (r->type == REDIS_REPLY_ERROR) {  // e.g. OOM: maxmemory reached with a noeviction policy
    count(&TierStats::n_errors);
    count(&TierStats::n_dropped_writes);
    return;
  }
  std::lock_guard lock(mu_);
  ++stats_.n_written_records;
  stats_.n_written_bytes += static_cast<int64_t>(record.size());
}

void RedisTier::mark(bool up, const std::string& why) {
  std::lock_guard lock(mu_);
  if ((stats_.up != 0) == up) return;
  stats_.up = up ? 1 : 0;
  const std::string url = redact_redis_url(opt_.url);
  if (up) {
    std::fprintf(stderr, "preface: Redis KV cache tier at %s answers again\n", url.c_str());
  } else {
    std::fprintf(stderr, "preface: Redis KV cache tier at %s is down (%s): lookups miss and writes are dropped until "
                 "it answers\n", url.c_str(), why.c_str());
  }
}

bool RedisTier::up() const {
  std::lock_guard lock(mu_);
  return stats_.up != 0;
}

TierStats RedisTier::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace preface::kv
