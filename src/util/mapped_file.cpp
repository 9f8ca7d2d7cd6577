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

namespace preface {

MappedFile::MappedFile(const std::string& path, Mode mode) : path_(path) {
  // O_NONBLOCK: opening a FIFO (or a device) for reading would otherwise wait for a writer forever; such a file is
  // refused below. It changes nothing for a regular file.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw Error("cannot open '" + path + "': " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    throw Error("cannot stat '" + path + "': " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error("'" + path + "' is not a regular file");
  }
  size_bytes_ = static_cast<size_t>(st.st_size);
  if (size_bytes_ > 0 && mode == Mode::Copy) {
    void* p = ::mmap(nullptr, size_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      throw Error("cannot allocate " + std::to_string(size_bytes_) + " bytes to read '" + path + "' into");
    }
    auto* out = static_cast<uint8_t*>(p);
    size_t done = 0;
    // The descriptor is non-blocking (above); a regular file reads in full regardless.
    while (done < size_bytes_) {
      const ssize_t n = ::read(fd, out + done, size_bytes_ - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const int err = n < 0 ? errno : 0;
        ::munmap(p, size_bytes_);
        ::close(fd);
        throw Error("cannot read '" + path + "': " + (n < 0 ? std::strerror(err) : "it shrank while being read"));
      }
      done += static_cast<size_t>(n);
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
