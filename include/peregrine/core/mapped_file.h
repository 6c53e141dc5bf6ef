// Read-only memory-mapped files: model files are parsed and validated in place (LlamaModel then
// copies the weight matrices into huge pages unless --mmap asks it to read them here).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "peregrine/core/status.h"

namespace peregrine {

/// A read-only mmap of a whole regular file. Move-only; unmaps on destruction.
class MappedFile {
 public:
  /// Maps `path` read-only.
  /// Errors: kNotFound (no such file), kInvalidArgument (a directory or not a regular file),
  /// kCorruptFile (empty file), kIoError (open/mmap failure).
  static Expected<std::shared_ptr<const MappedFile>> open(const std::string& path);

  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }
  std::span<const std::uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  MappedFile(std::string path, const std::uint8_t* data, std::size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  std::string path_;
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace peregrine
