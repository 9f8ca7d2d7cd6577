#include "util/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>
#include <utility>

#include "util/error.h"
#include "util/read_file.h"

namespace preface {

MappedFile::MappedFile(const std::string& path, Mode mode) : path_(path) {
  const OpenedFile f = open_regular_file(path);
  if (f.fd < 0) {
    throw Error(f.error != 0 ? "cannot open '" + path + "': " + std::strerror(f.error)
                             : "'" + path + "' is not a regular file");
  }
  const int fd = f.fd;
  size_bytes_ = static_cast<size_t>(f.size_bytes);
  if (size_bytes_ > 0 && mode == Mode::Copy) {
    void* p = ::mmap(nullptr, size_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      throw Error("cannot allocate " + std::to_string(size_bytes_) + " bytes to read '" + path + "' into");
    }
    auto* out = static_cast<uint8_t*>(p);
    const ssize_t n = read_fully(fd, out, size_bytes_);
    if (n != static_cast<ssize_t>(size_bytes_)) {
      const int err = n < 0 ? errno : 0;
      ::munmap(p, size_bytes_);
      ::close(fd);
      throw Error("cannot read '" + path + "': " + (n < 0 ? std::strerror(err) : "it shrank while being read"));
    }
    ::mprotect(p, size_bytes_, PROT_READ);
    data_ = out;
  } else if (size_bytes_ > 0) {
    void* p = ::mmap(nullptr, size_bytes_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      throw Error("cannot map '" + path + "': " + std::strerror(err));
    }
    data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
}

void MappedFile::release(const uint8_t* p, size_t n_bytes) const {
  if (p < data_ || n_bytes > size_bytes_ || p - data_ > static_cast<ptrdiff_t>(size_bytes_ - n_bytes)) {
    throw Error("release: range outside the mapping of '" + path_ + "'");
  }
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + n_bytes) / page * page;
  // Advice only: a failure leaves the pages resident, which is what not calling this would do.
  if (begin < end) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_bytes_);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_bytes_(std::exchange(other.size_bytes_, 0)),
      path_(std::move(other.path_)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_bytes_);
    data_ = std::exchange(other.data_, nullptr);
    size_bytes_ = std::exchange(other.size_bytes_, 0);
    path_ = std::move(other.path_);
  }
  return *this;
}

}  // namespace preface
