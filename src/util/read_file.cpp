#include "util/read_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/error.h"

namespace preface {

OpenedFile open_regular_file(const std::string& path) {
  OpenedFile f;
  // O_NONBLOCK: opening a FIFO for reading blocks until a writer opens it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    f.error = errno;
    return f;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    f.error = errno;
    ::close(fd);
    return f;
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return f;
  }
  f.fd = fd;
  f.size_bytes = static_cast<uint64_t>(st.st_size);
  return f;
}

ssize_t read_fully(int fd, void* buf, size_t n) {
  auto* out = static_cast<uint8_t*>(buf);
  size_t done = 0;
  while (done < n) {
    const ssize_t r = ::read(fd, out + done, n - done);
    if (r > 0) {
      done += static_cast<size_t>(r);
    } else if (r == 0) {
      break;
    } else if (errno != EINTR) {
      return -1;
    }
  }
  return static_cast<ssize_t>(done);
}

std::string read_regular_file(const std::string& path, size_t max_bytes, const std::string& what) {
  const OpenedFile f = open_regular_file(path);
  if (f.fd < 0) {
    throw Error("cannot read " + what + " '" + path + "': " +
                (f.error != 0 ? std::strerror(f.error) : "not a regular file"));
  }
  if (f.size_bytes > max_bytes) {
    ::close(f.fd);
    throw Error(what + " '" + path + "' is larger than " + std::to_string(max_bytes) + " bytes");
  }
  std::string out(static_cast<size_t>(f.size_bytes), '\0');
  const ssize_t n = read_fully(f.fd, out.data(), out.size());  // fewer: it shrank while read, keep what is there
  const int err = errno;
  ::close(f.fd);
  if (n < 0) throw Error("cannot read " + what + " '" + path + "': " + std::strerror(err));
  out.resize(static_cast<size_t>(n));
  return out;
}

}  // namespace preface
