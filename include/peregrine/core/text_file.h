// Whole-file reads of text inputs (prompts, calibration and evaluation texts).
#pragma once

#include <string>

#include "peregrine/core/status.h"

namespace peregrine {

/// The bytes of the regular file `path`. Errors: kNotFound (missing or not a regular file),
/// kIo (unreadable).
Expected<std::string> read_text_file(const std::string& path);

}  // namespace peregrine
