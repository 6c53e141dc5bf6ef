#include "peregrine/dist/mpi_prefill.h"

#include <cstring>
#include <set>

#include "idle_poll.h"

#ifdef PEREGRINE_HAVE_MPI
#include <mpi.h>
#endif

namespace peregrine {

#ifdef PEREGRINE_HAVE_MPI
namespace {

// Decode → prefill: requests, cancels (a u64 id), stop; prefill → decode: rows, then "stopped"
// once it sent its last rows (the decode side drains them until then, so no send is left
// waiting for a receive).
constexpr int kRequestTag = 21, kRowsTag = 22, kStopTag = 23, kLayoutTag = 24, kCancelTag = 25, kStoppedTag = 26;

// Whether a message from `from` with `tag` has arrived (its status in `status`).
bool arrived(int from, int tag, MPI_Status& status) {
  int flag = 0;
  MPI_Iprobe(from, tag, MPI_COMM_WORLD, &flag, &status);
  return flag != 0;
}

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
  receiver_.expect(id, kv_seq, from, static_cast<std::int64_t>(tokens.size()), n_layers_);
  outbox_.send(encode_prefill_request({id, from, std::vector<std::int32_t>(tokens.begin(), tokens.end())}), peer_, kRequestTag);
}

std::vector<std::pair<std::uint64_t, Status>> MpiRemotePrefill::poll(KvCache& cache) {
  std::vector<std::pair<std::uint64_t, Status>> done;
  outbox_.collect();
  MPI_Status status;
  while (arrived(peer_, kRowsTag, status)) {
    receive(buffer_, peer_, kRowsTag, status);
    if (auto end = receiver_.apply(buffer_, cache)) done.push_back(std::move(*end));
  }
  return done;
}

void MpiRemotePrefill::cancel(std::uint64_t id) {
  receiver_.cancel(id);
  std::vector<std::uint8_t> m(sizeof id);
  std::memcpy(m.data(), &id, sizeof id);
  outbox_.send(std::move(m), peer_, kCancelTag);  // the prefill rank stops computing it
}

void MpiRemotePrefill::stop() {
  if (stopped_) return;
  stopped_ = true;
  outbox_.send({}, peer_, kStopTag);
  MPI_Status status;
  for (bool stopped = false; !stopped;) {  // drop the rows still coming until the prefill rank stopped
    poll_until([&] { return arrived(peer_, kRowsTag, status) || arrived(peer_, kStoppedTag, status); });
    stopped = status.MPI_TAG == kStoppedTag;
    receive(buffer_, peer_, status.MPI_TAG, status);
  }
  outbox_.wait_all();
}

Status run_prefill_worker(PrefillInstance& instance, int decode_rank) {
  MpiOutbox outbox;
  std::vector<std::uint8_t> buffer;
  std::set<std::uint64_t> cancelled;
  bool stopping = false;
  MPI_Status status;
  const auto take_control = [&] {  // the cancels and the stop that arrived
    while (arrived(decode_rank, kCancelTag, status)) {
      receive(buffer, decode_rank, kCancelTag, status);
      std::uint64_t id = 0;
      if (buffer.size() == sizeof id) std::memcpy(&id, buffer.data(), sizeof id);
      cancelled.insert(id);
    }
    if (arrived(decode_rank, kStopTag, status)) {
      receive(buffer, decode_rank, kStopTag, status);
      stopping = true;
    }
  };
  const PrefillInstance::Ship ship = [&](std::vector<std::uint8_t> m) { outbox.send(std::move(m), decode_rank, kRowsTag); };
  Status error;
  while (!stopping && error.is_ok()) {
    // idle_poll.h: an idle prefill rank sleeps instead of spinning in MPI_Probe.
    poll_until([&] { return arrived(decode_rank, MPI_ANY_TAG, status); });
    take_control();
    if (stopping || !arrived(decode_rank, kRequestTag, status)) continue;
    receive(buffer, decode_rank, kRequestTag, status);
    auto request = decode_prefill_request(buffer);
    if (!request) {
      error = request.status();
    } else if (cancelled.erase(request->id) == 0) {
      instance.run(*request, ship, [&] {
        take_control();
        return !stopping && !cancelled.contains(request->id);
      });
      cancelled.erase(request->id);
    }
  }
  outbox.wait_all();  // the decode rank receives every rows message until "stopped"
  if (!error.is_ok()) return error;
  MPI_Send(nullptr, 0, MPI_BYTE, decode_rank, kStoppedTag, MPI_COMM_WORLD);
  return Status::ok();
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
void MpiRemotePrefill::cancel(std::uint64_t) {}
void MpiRemotePrefill::stop() {}
Status run_prefill_worker(PrefillInstance&, int) { return unavailable("this peregrine was built without MPI"); }
Status check_peer_kv_layout(const KvCache&, int) { return unavailable("this peregrine was built without MPI"); }

#endif

}  // namespace peregrine
