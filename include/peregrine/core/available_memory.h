// How much memory the system can give this process now, for load-time choices that trade
// memory for speed.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace peregrine {

/// Bytes of memory available to new allocations without swapping: Linux's MemAvailable from
/// /proc/meminfo (free memory plus the page cache and slabs the kernel can reclaim; kernel
/// documentation, Documentation/filesystems/proc.rst). nullopt where /proc/meminfo is missing
/// or has no MemAvailable line (kernels before 3.14, other systems).
std::optional<std::uint64_t> available_memory_bytes();

/// MemAvailable parsed from the text of a /proc/meminfo ("MemAvailable:   123456 kB"), in
/// bytes; nullopt when the line is absent or malformed.
std::optional<std::uint64_t> parse_mem_available(std::string_view meminfo);

}  // namespace peregrine
