// Finding a file among conventional names (a model folder's tokenizer, a checkpoint's neighbours).
#pragma once

#include <filesystem>
#include <initializer_list>
#include <string>

namespace peregrine {

/// The path of the first of `names` that is a regular file in `dir`, or "" when none is.
/// Never fails (an unreadable directory counts as holding none of them).
std::string first_existing_file(const std::filesystem::path& dir, std::initializer_list<const char*> names);

}  // namespace peregrine
