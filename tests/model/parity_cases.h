// The cases of build/testdata/manifest.json (tools/make_test_models.py): a model, its test
// tokens and the PyTorch reference's logits (tools/reference.py), for the parity tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace peregrine::test {

struct Case {
  std::string name, model;
  std::vector<std::int32_t> tokens;
  std::vector<float> logits;         // [tokens, vocab]: one forward over all tokens
  std::vector<float> decode_logits;  // [tokens, vocab]: a token-by-token decode's, where they differ
  std::int64_t vocab = 0;
  std::string lora;  // a LoRA adapter the reference applied unmerged (PEFT folder or LoRA GGUF); empty: none
};

/// Every case of the manifest (empty when the test models were not generated).
std::vector<Case> load_cases();

}  // namespace peregrine::test
