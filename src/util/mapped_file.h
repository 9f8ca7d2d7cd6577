// A whole file in memory, read-only: mapped from the file (the default: pages are read on demand and shared with
// the page cache; a file truncated while mapped makes reads of the lost pages raise SIGBUS), or copied into
// anonymous memory at open (Mode::Copy, `--no-mmap`: costs the file's size in RAM, and the file may then change or
// vanish without effect). Move-only; unmaps on destruction.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace preface {

class MappedFile {
 public:
  enum class Mode { Map, Copy };
  MappedFile() = default;
  // Throws preface::Error naming the path when the file cannot be opened, mapped or read.
  explicit MappedFile(const std::string& path, Mode mode = Mode::Map);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  // Drops the whole pages of [p, p + n_bytes) (a range inside the mapping) from this process's resident memory,
  // for bytes the caller has copied and will not read again: they stay readable, as the file's bytes, and are
  // read from the file (or page cache) if touched; with Mode::Copy they are freed and read as zeros. Partial pages
  // at the ends stay resident. Either way the bytes kept are unchanged, so this is const.
  void release(const uint8_t* p, size_t n_bytes) const;
  size_t size_bytes() const { return size_bytes_; }
  const std::string& path() const { return path_; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_bytes_ = 0;
  std::string path_;
};

}  // namespace preface
