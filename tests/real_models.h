// The real trained GGUF models of models/real_models.tsv (fetched by scripts/fetch_models.sh into
// $PEREGRINE_MODEL_CACHE or models/cache) and llama.cpp's reference results for them
// (tests/reference/llamacpp/NAME.json, written by tools/llamacpp_reference.py).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "peregrine/model/llama_model.h"
#include "peregrine/tokenizer/tokenizer.h"

namespace peregrine::test {

/// One row of the manifest.
struct RealModelEntry {
  std::string name;         // "smollm2-135m-instruct"
  std::string family;       // GGUF general.architecture
  std::string weight_type;  // "Q4_K_M"
  std::string path;         // where the fetch script puts it (it may not be there)
};

/// Every model of the manifest, in its order (empty, with a failed test, when it is unreadable).
const std::vector<RealModelEntry>& real_models();

/// The manifest's names (for INSTANTIATE_TEST_SUITE_P).
std::vector<std::string> real_model_names();

/// A GoogleTest parameter name for a manifest name ("qwen2.5-coder-0.5b" → "qwen2_5_coder_0_5b").
std::string real_model_test_name(const ::testing::TestParamInfo<std::string>& info);

/// The entry named `name`; fails the calling test (and returns an empty entry) when unknown.
RealModelEntry real_model(const std::string& name);

/// Whether the test of `name` must fail when the file is missing: $PEREGRINE_REQUIRE_REAL_MODELS
/// lists it (comma-separated names, or "all"); scripts/test.sh sets it to what it fetched.
bool real_model_required(const std::string& name);

/// A real model loaded for a test: its engine model and tokenizer.
struct LoadedRealModel {
  std::unique_ptr<LlamaModel> model;
  std::unique_ptr<Tokenizer> tokenizer;
};

/// Loads `entry`'s file (fails the calling test, returning nulls, when it cannot be loaded).
LoadedRealModel load_manifest_model(const RealModelEntry& entry);

/// llama.cpp's reference results for `name` (tests/reference/llamacpp/NAME.json); a null json
/// when there is no such file (fails the calling test when the file is malformed).
nlohmann::json llamacpp_reference(const std::string& name);

}  // namespace peregrine::test

/// Skips the calling test, with a message, when the real model `entry` is not in the cache and not
/// required; fails it when it is required (CI fetched it, so its absence is an error).
#define PEREGRINE_REQUIRE_REAL_MODEL(entry)                                                              \
  do {                                                                                                   \
    if (!std::filesystem::exists((entry).path)) {                                                        \
      if (::peregrine::test::real_model_required((entry).name)) {                                        \
        FAIL() << (entry).path << " is missing but required (PEREGRINE_REQUIRE_REAL_MODELS): run "        \
               << "scripts/fetch_models.sh " << (entry).name;                                            \
      }                                                                                                  \
      GTEST_SKIP() << (entry).path << " not fetched (scripts/fetch_models.sh " << (entry).name << ")";  \
    }                                                                                                    \
  } while (0)
