#include "peregrine/core/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

namespace peregrine {

Expected<OutputFile> OutputFile::create(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return io_error("cannot create " + path + ": " + std::strerror(errno));
  struct stat st {};
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  return OutputFile(path, fd, regular);
}

OutputFile::OutputFile(OutputFile&& other) noexcept
    : path_(std::move(other.path_)), fd_(other.fd_), size_(other.size_), regular_(other.regular_) {
  other.fd_ = -1;
}

OutputFile& OutputFile::operator=(OutputFile&& other) noexcept {
  if (this != &other) {
    discard();
    path_ = std::move(other.path_);
    fd_ = other.fd_;
    size_ = other.size_;
    regular_ = other.regular_;
    other.fd_ = -1;
  }
  return *this;
}

OutputFile::~OutputFile() { discard(); }

void OutputFile::discard() {
  if (fd_ < 0) return;
  ::close(fd_);
  if (regular_) ::unlink(path_.c_str());
  fd_ = -1;
}

Status OutputFile::write(std::span<const std::uint8_t> bytes) {
  if (fd_ < 0) return io_error("write to closed file " + path_);
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return io_error("cannot write " + path_ + ": " + std::strerror(n < 0 ? errno : EIO));
    bytes = bytes.subspan(static_cast<std::size_t>(n));
    size_ += static_cast<std::uint64_t>(n);
  }
  return Status::ok();
}

Status OutputFile::write_zeros(std::size_t n) {
  const std::vector<std::uint8_t> zeros(n, 0);
  return write(zeros);
}

Status OutputFile::close() {
  if (fd_ < 0) return io_error("close of closed file " + path_);
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) {
    const int err = errno;
    if (regular_) ::unlink(path_.c_str());
    return io_error("cannot write " + path_ + ": " + std::strerror(err));
  }
  return Status::ok();
}

}  // namespace peregrine
