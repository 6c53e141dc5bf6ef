// Embeddings from a decoder's final hidden states (after its final norm): pooled over a prompt's
// positions and scaled to unit L2 norm — llama.cpp's --pooling mean | last | cls, what OpenAI's
// /v1/embeddings returns.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "peregrine/core/status.h"

namespace peregrine {

enum class Pooling {
  kNone,  // not an embedding request
  kMean,  // the mean over every prompt position
  kLast,  // the last position's (causal models see the whole prompt there)
  kCls,   // the first position's (BERT's [CLS]; a decoder's BOS)
};

/// "mean", "last", "cls". Errors: kInvalidArgument naming the accepted values.
Expected<Pooling> parse_pooling(std::string_view name);

/// Folds the hidden states `rows` ([n, dim] f32, after the final norm) of positions
/// [first_pos, first_pos + n) into `acc` ([dim] f32; empty before the first rows): their sum
/// (kMean), the last row (kLast), position 0's row (kCls).
void pool_rows(Pooling pooling, std::int64_t first_pos, std::span<const float> rows, std::int64_t dim,
               std::vector<float>& acc);

/// The embedding of a prompt of `n_positions` from its folded `acc`: divided by n_positions for
/// kMean, then scaled to unit L2 norm (a zero vector stays zero).
std::vector<float> pooled_embedding(Pooling pooling, std::vector<float> acc, std::int64_t n_positions);

}  // namespace peregrine
