// The real stories260K model, loaded for tests that run forwards on it.
#pragma once

#include <memory>
#include <string>

#include "peregrine/model/llama_model.h"

namespace peregrine::test {

/// ../shared/models/stories260K/stories260K.bin.
std::string stories260k_path();

/// Loads stories260K (F32); fails the calling test (gtest ASSERT-style, returns nullptr) if it
/// cannot.
std::unique_ptr<LlamaModel> load_stories260k();

}  // namespace peregrine::test
