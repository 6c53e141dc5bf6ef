#include "peregrine/core/available_memory.h"

#include <charconv>
#include <fstream>
#include <sstream>
#include <string>

namespace peregrine {

std::optional<std::uint64_t> parse_mem_available(std::string_view meminfo) {
  constexpr std::string_view kKey = "MemAvailable:";
  std::size_t at = meminfo.find(kKey);
  if (at == std::string_view::npos || (at > 0 && meminfo[at - 1] != '\n')) return std::nullopt;
  at = meminfo.find_first_not_of(' ', at + kKey.size());
  if (at == std::string_view::npos) return std::nullopt;
  std::uint64_t kib = 0;
  const char* begin = meminfo.data() + at;
  const auto [end, ec] = std::from_chars(begin, meminfo.data() + meminfo.size(), kib);
  if (ec != std::errc() || std::string_view(end, meminfo.data() + meminfo.size()).substr(0, 3) != " kB") {
    return std::nullopt;
  }
  if (kib > UINT64_MAX / 1024) return std::nullopt;
  return kib * 1024;
}

std::optional<std::uint64_t> available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return parse_mem_available(text.str());
}

}  // namespace peregrine
