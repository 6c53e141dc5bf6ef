// A prefill instance serving this engine's prompts: disaggregated prefill and decode
// (DistServe, Zhong et al. 2024; Splitwise, Patel et al. 2024). The engine (the decode
// instance) admits a request, reserves its KV blocks and asks the prefill instance for the K/V
// of every prompt position but the last that its cache does not hold yet (a prefix-cache hit
// is not shipped again); the rows arrive, layer by layer, into those blocks (KvCache::write_rows)
// at later poll() calls, and the engine then computes the last prompt position itself, as a
// one-token prefill chunk beside the decodes, and samples from it. The transport is the
// implementation's (dist/kv_transfer.h: MPI point-to-point between two processes).
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/kv/kv_cache.h"

namespace peregrine {

class RemotePrefill {
 public:
  virtual ~RemotePrefill() = default;
  /// Asks for the K/V rows of positions [from, tokens.size()) of the sequence whose tokens are
  /// `tokens` (all of them are computed: prefill attends over the prefix too), for request `id`,
  /// to be written into sequence `kv_seq` of the engine's cache, which has reserved positions
  /// up to tokens.size(). 0 <= from < tokens.size().
  virtual void request(std::uint64_t id, std::int32_t kv_seq, std::span<const std::int32_t> tokens, std::int64_t from) = 0;
  /// Writes the rows that arrived since the last call into `cache`; returns the requests that
  /// are complete: status ok when all their rows are written (length(kv_seq) is then
  /// tokens.size()), else the prefill instance's error (nothing to rely on in their blocks).
  virtual std::vector<std::pair<std::uint64_t, Status>> poll(KvCache& cache) = 0;
  /// The engine dropped request `id` (finished or cancelled; its blocks may go to another
  /// sequence): rows still arriving for it are discarded.
  virtual void cancel(std::uint64_t id) = 0;
  /// K/V bytes written into the engine's cache so far (the rows; not the message headers).
  virtual std::int64_t bytes_received() const = 0;
  /// The engine asks for nothing more: the prefill instance may end.
  virtual void stop() = 0;
};

}  // namespace peregrine
