#include "kv/disk_tier.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <system_error>
#include <vector>

#include "util/error.h"
#include "util/read_file.h"

namespace preface::kv {
namespace fs = std::filesystem;
namespace {

constexpr const char* kSuffix = ".kvb";

// The whole file (at most max_bytes; more counts as unreadable); false on any error or when it is not a regular
// file (a FIFO planted under the cache directory must not block the engine's step: util/read_file.h).
bool read_file(const std::string& path, std::vector<uint8_t>& out, uint64_t max_bytes, bool touch) {
  const OpenedFile f = open_regular_file(path);
  if (f.fd < 0) return false;
  bool ok = f.size_bytes <= max_bytes;
  if (ok) {
    out.resize(static_cast<size_t>(f.size_bytes));
    const ssize_t n = read_fully(f.fd, out.data(), out.size());
    ok = n >= 0;
    if (ok) out.resize(static_cast<size_t>(n));  // shrank under us: decode sees a truncated record
  }
  if (ok && touch) ::futimens(f.fd, nullptr);  // a hit is a use: the LRU order on disk survives a restart
  ::close(f.fd);
  return ok;
}

bool write_file(const std::string& path, std::span<const uint8_t> bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  size_t done = 0;
  bool ok = true;
  while (ok && done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n > 0) done += static_cast<size_t>(n);
    else ok = n < 0 && errno == EINTR;
  }
  ok = (::close(fd) == 0) && ok;
  if (!ok) ::unlink(path.c_str());
  return ok;
}

std::optional<Digest> digest_from_hex(std::string_view hex) {
  if (hex.size() != 64) return std::nullopt;
  Digest d;
  for (size_t i = 0; i < 64; ++i) {
    const char c = hex[i];
    int v;
    if (c >= '0' && c <= '9') v = c - '0';
    else if (c >= 'a' && c <= 'f') v = c - 'a' + 10;
    else return std::nullopt;
    d.bytes[i / 2] = static_cast<uint8_t>(i % 2 == 0 ? v << 4 : (d.bytes[i / 2] | v));
  }
  return d;
}

}  // namespace

DiskTier::DiskTier(DiskTierOptions options)
    : opt_(std::move(options)), queue_(opt_.max_queue_bytes, [this](const TierWrite& w) { write(w); }) {
  stats_.name = "disk";
  try {
    std::error_code ec;
    fs::create_directories(fs::path(opt_.dir) / "tmp", ec);
    if (ec) throw Error("cannot create the cache directory " + opt_.dir + ": " + ec.message());
    scan();
  } catch (...) {
    queue_.stop();
    throw;
  }
}

DiskTier::~DiskTier() { queue_.stop(); }

std::string DiskTier::path_of(const Digest& hash) const {
  const std::string hex = to_hex(hash);
  return opt_.dir + "/" + hex.substr(0, 2) + "/" + hex + kSuffix;
}

void DiskTier::scan() {
  struct Found {
    Digest hash, ns;
    uint64_t bytes;
    fs::file_time_type mtime;
  };
  std::vector<Found> found;
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  for (const auto& e : fs::directory_iterator(fs::path(opt_.dir) / "tmp", ec)) {
    std::error_code e2;
    if (e.is_regular_file(e2) && now - e.last_write_time(e2) > std::chrono::hours(1)) fs::remove(e.path(), e2);
  }
  for (const auto& sub : fs::directory_iterator(opt_.dir, ec)) {
    std::error_code e2;
    const std::string subname = sub.path().filename().string();
    if (!sub.is_directory(e2) || subname.size() != 2 || subname == "tmp") continue;
    for (const auto& f : fs::directory_iterator(sub.path(), e2)) {
      std::error_code e3;
      const std::string fname = f.path().filename().string();
      if (!f.is_regular_file(e3) || !fname.ends_with(kSuffix)) continue;
      const auto named = digest_from_hex(std::string_view(fname).substr(0, fname.size() - 4));
      if (!named) continue;  // not ours
      std::vector<uint8_t> head(kRecordFixedHeaderBytes);
      const uint64_t size = f.file_size(e3);
      RecordStatus status = RecordStatus::Truncated;
      HeaderView h;
      const int fd = open_regular_file(f.path().string()).fd;
      if (fd >= 0) {
        ssize_t n = ::pread(fd, head.data(), head.size(), 0);
        if (n == static_cast<ssize_t>(head.size())) {
          h = decode_header(head);  // Truncated unless the header is only the fixed part (never): read the rest
          const uint32_t n_tokens = head[164] | head[165] << 8 | head[166] << 16 | static_cast<uint32_t>(head[167]) << 24;
          if (h.status == RecordStatus::Truncated && n_tokens <= (1u << 16)) {
            head.resize(record_header_bytes(static_cast<int32_t>(n_tokens)));
            n = ::pread(fd, head.data(), head.size(), 0);
            if (n == static_cast<ssize_t>(head.size())) h = decode_header(head);
          }
          status = h.status;
        }
        ::close(fd);
      }
      if (status == RecordStatus::Ok && h.meta.hash != *named) status = RecordStatus::Mismatch;
      if (status == RecordStatus::Ok && size != h.header_bytes + h.stored_bytes) status = RecordStatus::Truncated;
      if (status != RecordStatus::Ok) {
        ++stats_.n_rejected[static_cast<size_t>(status)];
        fs::remove(f.path(), e3);
        continue;
      }
      if (h.meta.model != opt_.model) {
        ++stats_.n_rejected[static_cast<size_t>(RecordStatus::OtherModel)];
      } else if (!opt_.kv_type.empty() && h.meta.kv_type != opt_.kv_type && h.meta.kv_type != "state") {
        ++stats_.n_rejected[static_cast<size_t>(RecordStatus::KvLayout)];
      }
      found.push_back({*named, h.meta.ns, size, f.last_write_time(e3)});
    }
  }
  if (ec) throw Error("cannot read the cache directory " + opt_.dir + ": " + ec.message());
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) { return a.mtime < b.mtime; });
  std::lock_guard lock(mu_);
  for (const Found& f : found) add_locked(f.hash, f.ns, f.bytes);
  evict_locked();
}

void DiskTier::add_locked(const Digest& hash, const Digest& ns, uint64_t bytes, bool announced) {
  if (const auto it = index_.find(hash); it != index_.end()) {
    announced = announced || it->second.announced;
    total_bytes_ -= it->second.bytes;
    lru_.erase(it->second.lru);
    index_.erase(it);
  }
  lru_.push_back(hash);
  index_.emplace(hash, Entry{std::prev(lru_.end()), bytes, ns, announced});
  total_bytes_ += bytes;
}

void DiskTier::remove_locked(Digest hash, bool unlink_file) {
  const auto it = index_.find(hash);
  if (it == index_.end()) return;
  if (TierEventSink* sink = sink_.load(); sink != nullptr && it->second.announced) sink->on_tier_removed("disk", hash);
  total_bytes_ -= it->second.bytes;
  lru_.erase(it->second.lru);
  index_.erase(it);
  if (unlink_file) ::unlink(path_of(hash).c_str());
}

void DiskTier::evict_locked() {
  while (total_bytes_ > opt_.max_bytes && !lru_.empty()) remove_locked(lru_.front(), true);
}

void DiskTier::reject(const Digest& hash, RecordStatus status) {
  std::lock_guard lock(mu_);
  ++stats_.n_rejected[static_cast<size_t>(status)];
  remove_locked(hash, true);
}

std::vector<std::vector<uint8_t>> DiskTier::fetch(std::span<const RecordMeta> expect) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::vector<uint8_t>> out;
  int64_t n_read = 0;
  for (const RecordMeta& want : expect) {
    RecordMeta queued;
    if (auto p = queue_.pending(want.hash, &queued)) {  // evicted a moment ago, not written yet
      if (queued.ns != want.ns || queued.parent != want.parent || queued.tokens != want.tokens ||
          queued.model != want.model || queued.kv_type != want.kv_type || p->size() != want.payload_bytes) {
        break;
      }
      out.push_back(*p);
      continue;
    }
    {
      std::lock_guard lock(mu_);
      if (!index_.contains(want.hash)) break;
    }
    std::vector<uint8_t> bytes;
    const uint64_t max = record_header_bytes(want.block_size) + want.payload_bytes + (want.payload_bytes >> 4) + 4096;
    if (!read_file(path_of(want.hash), bytes, max, true)) {  // unlinked meanwhile (LRU) or unreadable
      std::lock_guard lock(mu_);
      remove_locked(want.hash, false);
      break;
    }
    n_read += static_cast<int64_t>(bytes.size());
    std::vector<uint8_t> payload;
    const RecordStatus status = decode_record(bytes, want, payload, opt_.key.get());
    if (status != RecordStatus::Ok) {
      reject(want.hash, status);
      break;
    }
    out.push_back(std::move(payload));
    std::lock_guard lock(mu_);
    if (const auto it = index_.find(want.hash); it != index_.end()) lru_.splice(lru_.end(), lru_, it->second.lru);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::lock_guard lock(mu_);
  stats_.n_lookup_blocks += static_cast<int64_t>(expect.size());
  stats_.n_hit_blocks += static_cast<int64_t>(out.size());
  stats_.n_miss_blocks += static_cast<int64_t>(expect.size() - out.size());
  stats_.n_read_bytes += n_read;
  if (!out.empty()) {
    ++stats_.n_fetches;
    stats_.fetch_seconds += seconds;
  }
  return out;
}

bool DiskTier::contains(const Digest& hash) const {
  {
    std::lock_guard lock(mu_);
    if (index_.contains(hash)) return true;
  }
  return queue_.contains(hash);
}

void DiskTier::offer(const RecordMeta& meta, std::shared_ptr<const std::vector<uint8_t>> payload) {
  if (!queue_.push(TierWrite{meta, std::move(payload), std::nullopt})) {
    std::lock_guard lock(mu_);
    ++stats_.n_dropped_writes;
  }
}

void DiskTier::write(const TierWrite& w) {
  if (!w.payload) return;
  std::vector<uint8_t> record;
  try {
    record = encode_record(w.meta, *w.payload, opt_.compression, opt_.key.get());
  } catch (const std::exception&) {
    std::lock_guard lock(mu_);
    ++stats_.n_errors;
    return;
  }
  if (record.size() > opt_.max_bytes) {
    std::lock_guard lock(mu_);
    ++stats_.n_dropped_writes;
    return;
  }
  const std::string hex = to_hex(w.meta.hash);
  const std::string tmp =
      opt_.dir + "/tmp/" + hex + "." + std::to_string(::getpid()) + "." + std::to_string(tmp_seq_++) + ".tmp";
  const std::string final_path = path_of(w.meta.hash);
  std::error_code ec;
  fs::create_directories(fs::path(final_path).parent_path(), ec);
  const bool ok = !ec && write_file(tmp, record) && ::rename(tmp.c_str(), final_path.c_str()) == 0;
  std::lock_guard lock(mu_);
  if (!ok) {
    ::unlink(tmp.c_str());
    ++stats_.n_errors;
    return;
  }
  ++stats_.n_written_records;
  stats_.n_written_bytes += static_cast<int64_t>(record.size());
  bool announced = false;  // a record already indexed was announced (or not) when first written
  if (TierEventSink* sink = sink_.load(); sink != nullptr && !index_.contains(w.meta.hash)) {
    announced = sink->on_tier_stored("disk", w.meta);
  }
  add_locked(w.meta.hash, w.meta.ns, record.size(), announced);
  evict_locked();
}

void DiskTier::purge_namespace(const Digest& ns) {
  queue_.drop_namespace(ns);  // first: a queued write of ns would otherwise land after the purge
  std::lock_guard lock(mu_);
  std::vector<Digest> doomed;
  for (const auto& [hash, e] : index_) {
    if (e.ns == ns) doomed.push_back(hash);
  }
  for (const Digest& h : doomed) remove_locked(h, true);
}

TierStats DiskTier::stats() const {
  std::lock_guard lock(mu_);
  TierStats s = stats_;
  s.n_records = static_cast<int64_t>(index_.size());
  s.n_stored_bytes = static_cast<int64_t>(total_bytes_);
  return s;
}

}  // namespace preface::kv
