#include "peregrine/core/huge_page_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

namespace peregrine {

Expected<HugePageBuffer> HugePageBuffer::allocate(std::size_t size) {
  if (size == 0) return HugePageBuffer();
  if (size > SIZE_MAX / 2) return resource_exhausted("cannot map " + std::to_string(size) + " bytes for weights");
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t mapped = (size + page - 1) / page * page;
  // Over-map by one huge page, then unmap the head before the first 2 MiB boundary and the tail.
  void* raw = ::mmap(nullptr, mapped + kHugePageBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) {
    return resource_exhausted("cannot map " + std::to_string(size) + " bytes for weights: " + std::strerror(errno));
  }
  const auto start = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = (start + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  if (aligned > start) ::munmap(raw, aligned - start);
  const std::size_t tail = kHugePageBytes - (aligned - start);  // past aligned + mapped
  if (tail > 0) ::munmap(reinterpret_cast<void*>(aligned + mapped), tail);
  auto* data = reinterpret_cast<std::uint8_t*>(aligned);
  ::madvise(data, mapped, MADV_HUGEPAGE);  // a hint: EINVAL where THP is not built in changes nothing
  return HugePageBuffer(data, size, mapped);
}

HugePageBuffer::~HugePageBuffer() {
  if (data_ != nullptr) ::munmap(data_, mapped_);
}

HugePageBuffer::HugePageBuffer(HugePageBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)), mapped_(std::exchange(other.mapped_, 0)) {}

HugePageBuffer& HugePageBuffer::operator=(HugePageBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) ::munmap(data_, mapped_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapped_ = std::exchange(other.mapped_, 0);
  }
  return *this;
}

}  // namespace peregrine
