// Layer dropping (Gromov et al. 2024, "The Unreasonable Ineffectiveness of the Deeper Layers"):
// remove the n consecutive decoder blocks whose input and output hidden states point the most
// the same way, i.e. the blocks that change the residual stream least.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/core/thread_pool.h"
#include "peregrine/model/llama_model.h"
#include "peregrine/quant/float_model.h"

namespace peregrine {

/// For each start l in [0, n_layers − n]: the angular distance (1/π) · arccos(h_l · h_{l+n} /
/// (‖h_l‖ ‖h_{l+n}‖)) between the residual stream h_l entering block l and h_{l+n} leaving block
/// l + n − 1 (model/activation_observer.h observe_hidden), averaged over every token of the
/// calibration chunks (the paper uses each sequence's last token; a small calibration text has
/// few sequences, so every token counts here). Result [n_layers − n + 1], in [0, 1].
/// Errors: kInvalidArgument (n outside [1, n_layers), no chunks), the forward's errors.
Expected<std::vector<double>> block_distances(const LlamaModel& model, std::span<const std::vector<std::int32_t>> chunks,
                                              std::int64_t n, ThreadPool& pool);

/// Removes blocks [first, first + n) from `fm` (every "blk.L." tensor of them), renumbers the
/// later blocks down by n and sets config().n_layers −= n.
/// Precondition: 0 <= first, first + n <= n_layers, n >= 1.
void drop_blocks(FloatModel& fm, std::int64_t first, std::int64_t n);

}  // namespace peregrine
