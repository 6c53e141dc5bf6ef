// How a pruned model goes into a GGUF file, whose tensor types are ggml's block formats (plus
// Peregrine's N:M sparse types, quant/sparse_nm.h).
#pragma once

#include <string>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/formats/model_file.h"

namespace peregrine {

/// `pruned`'s tensors as GGUF holds them. A kInt linear (symmetric, 4 or 8 bits, groups of a
/// multiple of 32 columns) whose rows are whole 32-value blocks becomes the Q4_0 / Q8_0 blocks
/// that decode to exactly its values (a kInt symmetric group and a Q4_0 / Q8_0 block share
/// x = d · (q − zero)); another kInt linear becomes F16 of its values (rounded to f16), with a
/// line in `notes`.
/// Float tensors are kept. Errors: kInvalidArgument (a tensor whose bytes do not match its shape).
Expected<ModelFile> gguf_storage(const ModelFile& pruned, std::vector<std::string>& notes);

}  // namespace peregrine
