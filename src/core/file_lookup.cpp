#include "peregrine/core/file_lookup.h"

namespace peregrine {

std::string first_existing_file(const std::filesystem::path& dir, std::initializer_list<const char*> names) {
  std::error_code ec;
  for (const char* n : names) {
    if (std::filesystem::is_regular_file(dir / n, ec)) return (dir / n).string();
  }
  return "";
}

}  // namespace peregrine
