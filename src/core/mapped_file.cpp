#include "peregrine/core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace peregrine {

Expected<std::shared_ptr<const MappedFile>> MappedFile::open(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return not_found("no such file: " + path);
    return io_error("cannot stat " + path + ": " + std::strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) return invalid_argument(path + " is a directory, expected a file");
  if (!S_ISREG(st.st_mode)) return invalid_argument(path + " is not a regular file");
  if (st.st_size == 0) return corrupt_file(path + " is empty");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io_error("cannot open " + path + ": " + std::strerror(errno));
  const auto size = static_cast<std::size_t>(st.st_size);
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int mmap_errno = errno;
  ::close(fd);
  if (p == MAP_FAILED) return io_error("cannot mmap " + path + ": " + std::strerror(mmap_errno));
  return std::shared_ptr<const MappedFile>(
      new MappedFile(path, static_cast<const std::uint8_t*>(p), size));
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<std::uint8_t*>(data_), size_);
}

}  // namespace peregrine
