// Disaggregated serving across two MPI ranks (dist/kv_transfer.h's messages over MPI
// point-to-point on MPI_COMM_WORLD): the decode rank's engine asks the prefill rank for each
// prompt's K/V (MpiRemotePrefill, an engine/remote_prefill.h), and the prefill rank computes
// them and sends every layer's rows as the layer finishes (run_prefill_worker). Sends are
// non-blocking (MPI_Isend, buffers kept until MPI_Test completes them), so neither side waits
// for the other's loop while serving; the decode side polls (MPI_Iprobe) once per engine step,
// the prefill side between requests and chunks (src/dist/idle_poll.h: it sleeps while idle
// instead of spinning). A cancelled request is dropped by the prefill rank (before or between
// its chunks); at stop the decode side drains the rows still coming until the prefill rank says
// it stopped, so no send is left waiting.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/dist/kv_transfer.h"
#include "peregrine/engine/remote_prefill.h"

namespace peregrine {

/// Outgoing messages of one rank whose MPI_Isend may still be in flight.
class MpiOutbox {
 public:
  MpiOutbox();
  MpiOutbox(const MpiOutbox&) = delete;
  MpiOutbox& operator=(const MpiOutbox&) = delete;
  ~MpiOutbox();  // waits for every send (MPI_Waitall)
  /// MPI_Isend of `message` to world rank `to` with `tag`; keeps the buffer until it is sent.
  void send(std::vector<std::uint8_t> message, int to, int tag);
  /// Forgets the sends that completed (MPI_Test, oldest first).
  void collect();
  void wait_all();

 private:
  struct Pending;
  std::deque<std::unique_ptr<Pending>> pending_;
};

/// The decode rank's side. Call from one thread at a time (the engine's step loop; stop() after
/// it). The prefill rank must be in run_prefill_worker.
class MpiRemotePrefill final : public RemotePrefill {
 public:
  /// The prefill instance is world rank `prefill_rank`; the model has `n_layers` layers.
  MpiRemotePrefill(int prefill_rank, std::int64_t n_layers) : peer_(prefill_rank), n_layers_(n_layers) {}
  void request(std::uint64_t id, std::int32_t kv_seq, std::span<const std::int32_t> tokens, std::int64_t from) override;
  std::vector<std::pair<std::uint64_t, Status>> poll(KvCache& cache) override;
  /// Drops `id`'s rows here and tells the prefill rank to stop computing it.
  void cancel(std::uint64_t id) override;
  std::int64_t bytes_received() const override { return receiver_.bytes(); }
  void stop() override;

 private:
  int peer_;
  std::int64_t n_layers_;
  KvReceiver receiver_;
  MpiOutbox outbox_;
  std::vector<std::uint8_t> buffer_;
  bool stopped_ = false;
};

/// The prefill rank's loop: computes every request the decode rank sends, in order, skipping
/// cancelled ones, until it stops (then it waits for its rows to be received and says so).
/// Errors: kCorruptFile for a malformed request (a bug on the other side: the caller ends the
/// run); a request the model cannot compute is answered with its error instead.
Status run_prefill_worker(PrefillInstance& instance, int decode_rank);

/// Exchanges kv_layout(cache) with world rank `peer` (collective between the two).
/// Errors: kv_layout_matches's.
Status check_peer_kv_layout(const KvCache& cache, int peer);

}  // namespace peregrine
