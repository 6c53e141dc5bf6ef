#include "peregrine/dist/mpi_prefill.h"

#include "idle_poll.h"

#ifdef PEREGRINE_HAVE_MPI
#include <mpi.h>
#endif

namespace peregrine {

#ifdef PEREGRINE_HAVE_MPI
namespace {

constexpr int kRequestTag = 21, kRowsTag = 22, kStopTag = 23, kLayoutTag = 24;

// One whole message from `from` with `tag` (its size from MPI_Probe / MPI_Iprobe's status).
void receive(std::vector<std::uint8_t>& buffer, int from, int tag, MPI_Status& status) {
  int count = 0;
  MPI_Get_count(&status, MPI_BYTE, &count);
  buffer.resize(static_cast<std::size_t>(count));
  MPI_Recv(buffer.data(), count, MPI_BYTE, from, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

}  // namespace

struct MpiOutbox::Pending {
  std::vector<std::uint8_t> bytes;
  MPI_Request request = MPI_REQUEST_NULL;
};

MpiOutbox::MpiOutbox() = default;
MpiOutbox::~MpiOutbox() { wait_all(); }

void MpiOutbox::send(std::vector<std::uint8_t> message, int to, int tag) {
  collect();
  auto p = std::make_unique<Pending>(Pending{std::move(message), MPI_REQUEST_NULL});
  MPI_Isend(p->bytes.data(), static_cast<int>(p->bytes.size()), MPI_BYTE, to, tag, MPI_COMM_WORLD, &p->request);
  pending_.push_back(std::move(p));
}

void MpiOutbox::collect() {
  while (!pending_.empty()) {
    int done = 0;
    MPI_Test(&pending_.front()->request, &done, MPI_STATUS_IGNORE);
    if (!done) return;
    pending_.pop_front();
  }
}

void MpiOutbox::wait_all() {
  for (auto& p : pending_) MPI_Wait(&p->request, MPI_STATUS_IGNORE);
  pending_.clear();
}

void MpiRemotePrefill::request(std::uint64_t id, std::int32_t kv_seq, std::span<const std::int32_t> tokens, std::int64_t from) {
  receiver_.expect(id, kv_seq, static_cast<std::int64_t>(tokens.size()));
  outbox_.send(encode_prefill_request({id, from, std::vector<std::int32_t>(tokens.begin(), tokens.end())}), peer_, kRequestTag);
}

std::vector<std::pair<std::uint64_t, Status>> MpiRemotePrefill::poll(KvCache& cache) {
  std::vector<std::pair<std::uint64_t, Status>> done;
  outbox_.collect();
  for (;;) {
    int arrived = 0;
    MPI_Status status;
    MPI_Iprobe(peer_, kRowsTag, MPI_COMM_WORLD, &arrived, &status);
    if (!arrived) return done;
    receive(buffer_, peer_, kRowsTag, status);
    if (auto end = receiver_.apply(buffer_, cache)) done.push_back(std::move(*end));
  }
}

void MpiRemotePrefill::stop() {
  if (stopped_) return;
  stopped_ = true;
  outbox_.wait_all();
  MPI_Send(nullptr, 0, MPI_BYTE, peer_, kStopTag, MPI_COMM_WORLD);
}

Status run_prefill_worker(PrefillInstance& instance, int decode_rank) {
  MpiOutbox outbox;
  std::vector<std::uint8_t> buffer;
  const PrefillInstance::Ship ship = [&](std::vector<std::uint8_t> m) { outbox.send(std::move(m), decode_rank, kRowsTag); };
  for (;;) {
    MPI_Status status;
    poll_until([&] {  // idle_poll.h: an idle prefill rank sleeps instead of spinning in MPI_Probe
      int arrived = 0;
      MPI_Iprobe(decode_rank, MPI_ANY_TAG, MPI_COMM_WORLD, &arrived, &status);
      return arrived != 0;
    });
    receive(buffer, decode_rank, status.MPI_TAG, status);
    if (status.MPI_TAG == kStopTag) return Status::ok();
    PEREGRINE_ASSIGN_OR_RETURN(const PrefillRequest request, decode_prefill_request(buffer));
    instance.run(request, ship);
  }
}

Status check_peer_kv_layout(const KvCache& cache, int peer) {
  std::vector<std::int64_t> mine = kv_layout(cache), theirs(mine.size());
  MPI_Sendrecv(mine.data(), static_cast<int>(mine.size()), MPI_INT64_T, peer, kLayoutTag, theirs.data(),
               static_cast<int>(theirs.size()), MPI_INT64_T, peer, kLayoutTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  return kv_layout_matches(cache, theirs);
}

#else  // no MPI in this build: serve --role refuses before any of this is reached

struct MpiOutbox::Pending {};
MpiOutbox::MpiOutbox() = default;
MpiOutbox::~MpiOutbox() = default;
void MpiOutbox::send(std::vector<std::uint8_t>, int, int) {}
void MpiOutbox::collect() {}
void MpiOutbox::wait_all() {}
void MpiRemotePrefill::request(std::uint64_t, std::int32_t, std::span<const std::int32_t>, std::int64_t) {}
std::vector<std::pair<std::uint64_t, Status>> MpiRemotePrefill::poll(KvCache&) { return {}; }
void MpiRemotePrefill::stop() {}
Status run_prefill_worker(PrefillInstance&, int) { return unavailable("this peregrine was built without MPI"); }
Status check_peer_kv_layout(const KvCache&, int) { return unavailable("this peregrine was built without MPI"); }

#endif

}  // namespace peregrine
