#include "model/fingerprint.h"

#include <openssl/evp.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <vector>

#include "util/error.h"

namespace preface::model {
namespace {

struct Stamp {
  long long size_bytes = -1;
  long long mtime_ns = -1;
};

Stamp stamp_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return {static_cast<long long>(st.st_size),
          static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec};
}

std::string hex(const unsigned char* bytes, unsigned n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (unsigned i = 0; i < n; ++i) {
    out[2 * i] = kDigits[bytes[i] >> 4];
    out[2 * i + 1] = kDigits[bytes[i] & 15];
  }
  return out;
}

std::mutex& dir_mu() {
  static std::mutex mu;
  return mu;
}
std::string& chosen_dir() {  // under dir_mu()
  static std::string dir;
  return dir;
}

// The cache file of a model, named by its absolute path.
std::vector<std::filesystem::path> cache_paths(const std::string& model_path) {
  const std::string dir = cache_dir();
  if (dir.empty()) return {};
  std::error_code ec;
  std::string flat = std::filesystem::absolute(model_path, ec).string();
  for (char& c : flat) {
    if (c == '/') c = '_';
  }
  return {std::filesystem::path(dir) / "fingerprints" / (flat + ".fingerprint")};
}

}  // namespace

std::string cache_dir() {
  {
    std::lock_guard lock(dir_mu());
    if (!chosen_dir().empty()) return chosen_dir();
  }
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    return (std::filesystem::path(xdg) / "preface").string();
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return (std::filesystem::path(home) / ".cache" / "preface").string();
  }
  return {};
}

void set_cache_dir(std::string dir) {
  std::lock_guard lock(dir_mu());
  chosen_dir() = std::move(dir);
}

std::string sha256_hex(const MappedFile& file) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1 ||
      EVP_DigestUpdate(ctx.get(), file.data(), file.size_bytes()) != 1) {
    throw Error("SHA-256 failed for '" + file.path() + "'");
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  if (EVP_DigestFinal_ex(ctx.get(), digest, &n) != 1) throw Error("SHA-256 failed for '" + file.path() + "'");
  return hex(digest, n);
}

std::string model_fingerprint(const MappedFile& file) {
  const Stamp stamp = stamp_of(file.path());
  const auto paths = cache_paths(file.path());
  for (const auto& p : paths) {  // a cache line is "<size_bytes> <mtime_ns> <sha256 hex>"
    std::ifstream in(p);
    Stamp cached;
    std::string digest;
    if (in >> cached.size_bytes >> cached.mtime_ns >> digest && cached.size_bytes == stamp.size_bytes &&
        cached.mtime_ns == stamp.mtime_ns && digest.size() == 64) {
      return digest;
    }
  }
  const std::string digest = sha256_hex(file);
  for (const auto& p : paths) {
    std::error_code ec;
    std::filesystem::create_directories(p.parent_path(), ec);
    std::ofstream out(p, std::ios::trunc);
    if (out << stamp.size_bytes << ' ' << stamp.mtime_ns << ' ' << digest << '\n') break;
  }
  return digest;
}

}  // namespace preface::model
