// A read-only memory mapping of a whole file. Move-only; unmaps on destruction.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace preface {

class MappedFile {
 public:
  MappedFile() = default;
  // Throws preface::Error naming the path when the file cannot be opened or mapped.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  // Drops the whole pages of [p, p + n_bytes) (a range inside the mapping) from this process's resident memory,
  // for bytes the caller has copied and will not read again: they stay readable, as the file's bytes, and are
  // read from the file (or page cache) if touched. Partial pages at the ends stay resident. The contents never
  // change (a private read-only mapping), so this is const.
  void release(const uint8_t* p, size_t n_bytes) const;
  size_t size_bytes() const { return size_bytes_; }
  const std::string& path() const { return path_; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_bytes_ = 0;
  std::string path_;
};

}  // namespace preface
