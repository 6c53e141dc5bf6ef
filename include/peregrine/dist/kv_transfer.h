// Disaggregated prefill / decode, the part that does not depend on the transport
// (engine/remote_prefill.h; DistServe, Zhong et al. 2024; Splitwise, Patel et al. 2024):
// the messages, the prefill instance that computes a prompt and emits its K/V rows layer by
// layer as each layer finishes, and the decode side's receiver that writes them into its cache.
//
// Messages are byte strings (dist/mpi_prefill.h moves them between two MPI ranks):
//  - a prefill request: u64 id, i64 from, i64 n_tokens, then n_tokens i32 token ids: compute
//    positions [0, n_tokens) and ship the K/V rows of [from, n_tokens);
//  - a rows message: the KvRowsHeader, then for layer >= 0 the K rows and then the V rows of
//    positions [first, first + n) in the KV dtype (2 · n · KvCache::row_bytes() bytes); for
//    layer == kEndOfRequest the request's end: code 0 (ok) or an ErrorCode, then its message.
// Both caches must hold the same model's layers in the same KV dtype (kv_layout_matches).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/core/thread_pool.h"
#include "peregrine/kv/kv_cache.h"
#include "peregrine/model/llama_model.h"

namespace peregrine {

struct PrefillRequest {
  std::uint64_t id = 0;
  std::int64_t from = 0;              // first position whose K/V are shipped
  std::vector<std::int32_t> tokens;   // positions [0, tokens.size()) are computed
};

std::vector<std::uint8_t> encode_prefill_request(const PrefillRequest& r);
/// Errors: kCorruptFile (a message shorter than its counts, or from outside [0, n_tokens)).
Expected<PrefillRequest> decode_prefill_request(std::span<const std::uint8_t> message);

inline constexpr std::int64_t kEndOfRequest = -1;

struct KvRowsHeader {
  std::uint64_t id = 0;
  std::int64_t layer = 0;  // or kEndOfRequest
  std::int64_t first = 0;  // rows [first, first + n)
  std::int64_t n = 0;
  std::int32_t code = 0;   // ErrorCode of an end message
  std::int32_t reserved = 0;
};

/// The K/V layout both sides must share, as 4 int64: n_layers, kv_dim, KV dtype, row bytes.
std::vector<std::int64_t> kv_layout(const KvCache& cache);
/// Errors: kInvalidArgument naming both layouts when they differ (another model or --kv-type).
Status kv_layout_matches(const KvCache& mine, std::span<const std::int64_t> theirs);

/// The prefill instance: runs each request's prompt through `model` on its own `cache` (one
/// request at a time, in chunks of max_batch_tokens rows; no prefix cache) and hands every
/// rows message to `ship` as soon as the layer that wrote it finished (an ActivationObserver
/// sees each layer's end), so that sending overlaps the following layers.
class PrefillInstance {
 public:
  using Ship = std::function<void(std::vector<std::uint8_t>)>;
  /// `model` and `pool` must outlive it. The cache needs blocks for the longest prompt.
  PrefillInstance(const LlamaModel& model, KvCache cache, ThreadPool& pool, std::int64_t max_batch_tokens);
  /// Computes `r` and ships its rows messages, then its end message (ok, or the forward's error:
  /// e.g. kResourceExhausted for a prompt longer than this instance's cache holds; kCancelled
  /// when `keep_going`, asked before each chunk, says no).
  void run(const PrefillRequest& r, const Ship& ship, const std::function<bool()>& keep_going = [] { return true; });
  const KvCache& cache() const { return cache_; }

 private:
  Status compute(const PrefillRequest& r, const Ship& ship, const std::function<bool()>& keep_going);
  const LlamaModel& model_;
  KvCache cache_;
  ThreadPool& pool_;
  std::int64_t max_batch_tokens_;
};

/// The decode side: writes the rows messages of the requests it expects into the cache.
class KvReceiver {
 public:
  /// Rows [from, length) of every layer of request `id` go to sequence `kv_seq`, whose
  /// positions [0, length) are reserved (those before `from` are the engine's: never written).
  void expect(std::uint64_t id, std::int32_t kv_seq, std::int64_t from, std::int64_t length, std::int64_t n_layers);
  /// Rows for `id` are dropped from now on.
  void cancel(std::uint64_t id) { pending_.erase(id); }
  /// Writes one rows message into `cache` (a request not expected, or cancelled, is skipped).
  /// At a request's end returns (id, its status), after setting length(kv_seq) on success; a
  /// message that does not fit its request (layer, positions outside [from, length), size), an
  /// unknown error code, or an ok end before every layer's rows arrived ends it with kInternal.
  std::optional<std::pair<std::uint64_t, Status>> apply(std::span<const std::uint8_t> message, KvCache& cache);
  /// Row bytes written so far.
  std::int64_t bytes() const { return bytes_; }

 private:
  struct Pending {
    std::int32_t kv_seq;
    std::int64_t from, length;
    std::vector<std::int64_t> rows;  // per layer, rows written so far
    Status error;                    // the first malformed message's
  };
  std::unordered_map<std::uint64_t, Pending> pending_;
  std::int64_t bytes_ = 0;
};

}  // namespace peregrine
