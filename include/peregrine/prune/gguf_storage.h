// How a pruned model goes into a GGUF file, whose tensor types are ggml's block formats (plus
// Peregrine's N:M sparse types, quant/sparse_nm.h).
#pragma once

#include <string>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/formats/model_file.h"
#include "peregrine/prune/sparsity.h"

namespace peregrine {

/// `pruned`'s tensors as GGUF holds them. A kInt linear (symmetric, 4 or 8 bits, groups of a
/// multiple of 32 columns) whose rows are whole 32-value blocks becomes the Q4_0 / Q8_0 blocks
/// that decode to exactly its values (a kInt symmetric group and a Q4_0 / Q8_0 block share
/// x = d · (q − zero)); another kInt linear becomes F16 of its values (rounded to f16), with a
/// line in `notes`.
/// Float tensors are kept.
/// With a 2:4 or 4:8 `target`, every pruned linear whose columns are whole m-groups is stored in
/// the N:M sparse dtypes instead (quant/sparse_nm.h: kept values + a 1-bit-per-column mask, read
/// by the sparse kernels): float linears as F16 kept values (BF16 for a BF16 source; an F32
/// source's kept values are rounded to F16, noted), kInt ones as Q4_0 / Q8_0 blocks of 32 kept
/// codes with their group's scale (quant_group(target) columns hold exactly 32 kept values), so
/// they decode to exactly the pruned model's values; `linears` names the pruned tensors.
/// Errors: kInvalidArgument (a tensor whose bytes do not match its shape).
Expected<ModelFile> gguf_storage(const ModelFile& pruned, const SparsityTarget& target, const std::vector<std::string>& linears,
                                 std::vector<std::string>& notes);

}  // namespace peregrine
