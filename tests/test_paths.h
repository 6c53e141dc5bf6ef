// Paths to real data used by the tests (the shared read-only folder, generated test models).
#pragma once

#include <string>

namespace peregrine::test {

/// ../shared (real models, tokenizers, texts); $PEREGRINE_SHARED_DIR overrides it.
std::string shared_dir();
/// The repository root.
std::string source_dir();
/// build/testdata (random-weight models + reference logits written by tools/);
/// $PEREGRINE_TESTDATA_DIR overrides it.
std::string testdata_dir();
/// The built CLI binary.
std::string peregrine_binary();
/// A fresh empty temporary directory, unique per call.
std::string make_temp_dir();

/// Reads a whole file (binary); "" if it cannot be read.
std::string read_file(const std::string& path);

}  // namespace peregrine::test
