#include "peregrine/dist/forward_mirror.h"

#include <vector>

#include "idle_poll.h"

#ifdef PEREGRINE_HAVE_MPI
#include <mpi.h>
#endif

namespace peregrine {
namespace {

// A step as one int32 message: [kind, n_freed, freed..., n_copies, (from, to)..., n_tables,
// (seq, length, n_blocks, blocks...)..., n_slots, slot adapters..., n_rows, tokens, positions,
// seq_ids, need_logits, has_lora_slots, lora_slots (when has)]; kind 1 = forward, 0 = stop.
constexpr std::int32_t kStop = 0, kForward = 1;

std::vector<std::int32_t> encode(const Batch& b, const KvCache::FollowerUpdate& kv, std::span<const std::int32_t> slot_adapters) {
  std::vector<std::int32_t> m = {kForward, static_cast<std::int32_t>(kv.freed.size())};
  m.insert(m.end(), kv.freed.begin(), kv.freed.end());
  m.push_back(static_cast<std::int32_t>(kv.copies.size()));
  for (const auto& [from, to] : kv.copies) m.insert(m.end(), {from, to});
  m.push_back(static_cast<std::int32_t>(kv.tables.size()));
  for (const KvCache::FollowerUpdate::Table& t : kv.tables) {
    m.insert(m.end(), {t.seq, static_cast<std::int32_t>(t.length), static_cast<std::int32_t>(t.blocks.size())});
    m.insert(m.end(), t.blocks.begin(), t.blocks.end());
  }
  m.push_back(static_cast<std::int32_t>(slot_adapters.size()));
  m.insert(m.end(), slot_adapters.begin(), slot_adapters.end());
  m.push_back(static_cast<std::int32_t>(b.size()));
  m.insert(m.end(), b.tokens.begin(), b.tokens.end());
  m.insert(m.end(), b.positions.begin(), b.positions.end());
  m.insert(m.end(), b.seq_ids.begin(), b.seq_ids.end());
  m.insert(m.end(), b.need_logits.begin(), b.need_logits.end());
  m.push_back(b.lora_slots.empty() ? 0 : 1);
  m.insert(m.end(), b.lora_slots.begin(), b.lora_slots.end());
  return m;
}

// The KV update, the slot adapters and the batch of a kForward message.
void decode(const std::vector<std::int32_t>& m, KvCache::FollowerUpdate& kv, std::vector<std::int32_t>& slot_adapters, Batch& b) {
  std::size_t at = 1;
  const auto take = [&](std::size_t n) {
    std::vector<std::int32_t> out(m.begin() + static_cast<std::ptrdiff_t>(at), m.begin() + static_cast<std::ptrdiff_t>(at + n));
    at += n;
    return out;
  };
  kv.freed = take(static_cast<std::size_t>(m[at++]));
  kv.copies.resize(static_cast<std::size_t>(m[at++]));
  for (auto& [from, to] : kv.copies) from = m[at++], to = m[at++];
  kv.tables.resize(static_cast<std::size_t>(m[at++]));
  for (KvCache::FollowerUpdate::Table& t : kv.tables) {
    t.seq = m[at++];
    t.length = m[at++];
    t.blocks = take(static_cast<std::size_t>(m[at++]));
  }
  slot_adapters = take(static_cast<std::size_t>(m[at++]));
  const auto n = static_cast<std::size_t>(m[at++]);
  b.clear();
  for (std::size_t i = 0; i < n; ++i) {
    b.add(m[at + i], m[at + n + i], m[at + 2 * n + i], m[at + 3 * n + i] != 0);
  }
  at += 4 * n;
  if (m[at++] != 0) b.lora_slots = take(n);
  b.kv_planned = true;  // rank 0's scheduler planned it: the tables and lengths of `kv` cover it
}

#ifdef PEREGRINE_HAVE_MPI
// Rank 0's m to every rank. The size goes by MPI_Ibcast, which a worker waits for by polling
// (idle_poll.h: an idle server's workers sleep instead of spinning); the body by MPI_Bcast.
void broadcast(std::vector<std::int32_t>& m) {
  auto size = static_cast<std::int64_t>(m.size());
  MPI_Request request;
  MPI_Ibcast(&size, 1, MPI_INT64_T, 0, MPI_COMM_WORLD, &request);
  poll_until([&] {
    int done = 0;
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    return done != 0;
  });
  m.resize(static_cast<std::size_t>(size));
  MPI_Bcast(m.data(), static_cast<int>(size), MPI_INT32_T, 0, MPI_COMM_WORLD);
}
#else
void broadcast(std::vector<std::int32_t>&) {}
#endif

}  // namespace

void MpiForwardMirror::forward(const Batch& batch, const KvCache::FollowerUpdate& kv, std::span<const std::int32_t> slot_adapters) {
  std::vector<std::int32_t> m = encode(batch, kv, slot_adapters);
  broadcast(m);
}

void MpiForwardMirror::stop() {
  std::vector<std::int32_t> m = {kStop};
  broadcast(m);
}

Status run_forward_worker(const LlamaModel& model, KvCache& cache, ThreadPool& pool, LoraPool* lora) {
  std::vector<std::int32_t> m, slot_adapters;
  KvCache::FollowerUpdate kv;
  std::vector<float> logits;
  Batch batch;
  for (;;) {
    broadcast(m);
    if (m.empty() || m[0] == kStop) return Status::ok();
    decode(m, kv, slot_adapters, batch);
    cache.follow(kv);
    for (std::size_t slot = 0; slot < slot_adapters.size() && lora != nullptr; ++slot) {
      if (slot_adapters[slot] >= 0) PEREGRINE_RETURN_IF_ERROR(lora->place(static_cast<std::int32_t>(slot), slot_adapters[slot]));
    }
    PEREGRINE_RETURN_IF_ERROR(model.forward(batch, cache, logits, pool, 0, nullptr, lora != nullptr ? &lora->set() : nullptr));
  }
}

std::int64_t broadcast_from_first_rank(std::int64_t value) {
#ifdef PEREGRINE_HAVE_MPI
  MPI_Bcast(&value, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
#endif
  return value;
}

}  // namespace peregrine
