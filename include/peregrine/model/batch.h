// The ragged batch: the one input of Model::forward (prefill, decode, chunked prefill, mixed
// batches and speculative verification are all Batches).
#pragma once

#include <cstdint>
#include <vector>

namespace peregrine {

/// n flattened rows; row i is token `tokens[i]` of sequence `seq_ids[i]` at absolute position
/// `positions[i]` (0-based). Rows of one sequence must be in increasing, consecutive position
/// order. Attention is causal by position: a row sees every earlier position of its own
/// sequence (from the KV cache and from this batch) and itself. `need_logits[i]` != 0 asks for
/// that row's logits (prefill usually wants only the last row).
struct Batch {
  std::vector<std::int32_t> tokens;
  std::vector<std::int32_t> positions;
  std::vector<std::int32_t> seq_ids;
  std::vector<std::uint8_t> need_logits;

  /// Appends one row.
  void add(std::int32_t token, std::int32_t position, std::int32_t seq_id, bool logits) {
    tokens.push_back(token);
    positions.push_back(position);
    seq_ids.push_back(seq_id);
    need_logits.push_back(logits ? 1 : 0);
  }
  std::int64_t size() const { return static_cast<std::int64_t>(tokens.size()); }
  /// Number of rows with need_logits set (rows of forward's logits output).
  std::int64_t n_logits() const;
  void clear();
};

}  // namespace peregrine
