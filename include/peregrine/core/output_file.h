// A file being written: unbuffered POSIX writes with errors as values, and no half-written
// file left behind (an OutputFile destroyed before close() removes what it wrote; only regular
// files are removed, never a device such as /dev/null).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "peregrine/core/status.h"

namespace peregrine {

/// Move-only owner of a file descriptor opened for writing (created or truncated).
class OutputFile {
 public:
  /// Creates (or truncates) `path` with mode 0644.
  /// Errors: kIoError "cannot create PATH: <strerror>" (missing folder, no permission, ...).
  static Expected<OutputFile> create(const std::string& path);

  OutputFile(OutputFile&& other) noexcept;
  OutputFile& operator=(OutputFile&& other) noexcept;
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  /// An unclosed file is closed and removed (the write did not finish).
  ~OutputFile();

  /// Appends `bytes` (retrying short writes). Errors: kIoError naming the path (disk full, ...).
  Status write(std::span<const std::uint8_t> bytes);
  /// Appends `n` zero bytes (alignment padding).
  Status write_zeros(std::size_t n);
  /// Bytes written so far.
  std::uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  /// Closes the file, keeping it. Errors: kIoError if the close reports a failed write.
  Status close();

 private:
  OutputFile(std::string path, int fd, bool regular) : path_(std::move(path)), fd_(fd), regular_(regular) {}
  void discard();

  std::string path_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
  bool regular_ = false;  // a regular file: removed when not closed
};

}  // namespace peregrine
