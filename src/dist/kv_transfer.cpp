#include "peregrine/dist/kv_transfer.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "peregrine/model/activation_observer.h"

namespace peregrine {
namespace {

template <typename T>
void put(std::vector<std::uint8_t>& out, const T& value) {
  const std::size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &value, sizeof(T));
}

template <typename T>
T get(std::span<const std::uint8_t> in, std::size_t at) {
  T value;
  std::memcpy(&value, in.data() + at, sizeof(T));
  return value;
}

std::vector<std::uint8_t> rows_message(const KvRowsHeader& h, std::size_t payload) {
  std::vector<std::uint8_t> m;
  m.reserve(sizeof h + payload);
  put(m, h);
  m.resize(sizeof h + payload);
  return m;
}

std::vector<std::uint8_t> end_message(std::uint64_t id, const Status& status) {
  KvRowsHeader h;
  h.id = id;
  h.layer = kEndOfRequest;
  h.code = static_cast<std::int32_t>(status.code());
  std::vector<std::uint8_t> m = rows_message(h, status.message().size());
  std::memcpy(m.data() + sizeof h, status.message().data(), status.message().size());
  return m;
}

// Ships each layer's rows [from, chunk end) of one forward chunk as the layer ends: the
// residual stream entering layer l (and leaving the last) means layer l - 1 wrote its K/V.
class LayerShipper final : public ActivationObserver {
 public:
  LayerShipper(const KvCache& cache, std::uint64_t id, std::int64_t first, std::int64_t n, const PrefillInstance::Ship& ship)
      : cache_(cache), id_(id), first_(first), n_(n), ship_(ship) {}
  void observe(std::int64_t, LinearInput, std::span<const float>, std::int64_t) override {}
  void observe_hidden(std::int64_t layer, std::span<const float>, std::int64_t) override {
    if (layer == 0 || n_ == 0) return;
    KvRowsHeader h;
    h.id = id_;
    h.layer = layer - 1;
    h.first = first_;
    h.n = n_;
    std::vector<std::uint8_t> m = rows_message(h, static_cast<std::size_t>(2 * n_ * cache_.row_bytes()));
    cache_.read_rows(0, layer - 1, first_, n_, m.data() + sizeof h);
    ship_(std::move(m));
  }

 private:
  const KvCache& cache_;
  std::uint64_t id_;
  std::int64_t first_, n_;
  const PrefillInstance::Ship& ship_;
};

}  // namespace

std::vector<std::uint8_t> encode_prefill_request(const PrefillRequest& r) {
  std::vector<std::uint8_t> m;
  put(m, r.id);
  put(m, r.from);
  put(m, static_cast<std::int64_t>(r.tokens.size()));
  for (std::int32_t t : r.tokens) put(m, t);
  return m;
}

Expected<PrefillRequest> decode_prefill_request(std::span<const std::uint8_t> message) {
  constexpr std::size_t kHead = 8 * 3;
  if (message.size() < kHead) return corrupt_file("a prefill request of " + std::to_string(message.size()) + " bytes");
  PrefillRequest r;
  r.id = get<std::uint64_t>(message, 0);
  r.from = get<std::int64_t>(message, 8);
  const auto n = get<std::int64_t>(message, 16);
  if (n < 1 || static_cast<std::size_t>(n) != (message.size() - kHead) / 4 || (message.size() - kHead) % 4 != 0 ||
      r.from < 0 || r.from >= n) {
    return corrupt_file("a prefill request whose counts do not match its " + std::to_string(message.size()) + " bytes");
  }
  r.tokens.resize(static_cast<std::size_t>(n));
  std::memcpy(r.tokens.data(), message.data() + kHead, r.tokens.size() * 4);
  return r;
}

std::vector<std::int64_t> kv_layout(const KvCache& cache) {
  return {cache.n_layers(), cache.kv_dim(), static_cast<std::int64_t>(cache.dtype()), cache.row_bytes()};
}

Status kv_layout_matches(const KvCache& mine, std::span<const std::int64_t> theirs) {
  const std::vector<std::int64_t> own = kv_layout(mine);
  if (std::equal(own.begin(), own.end(), theirs.begin(), theirs.end())) return Status::ok();
  const auto text = [](std::span<const std::int64_t> l) {
    if (l.size() != 4) return std::string("(malformed)");
    return std::to_string(l[0]) + " layers × kv_dim " + std::to_string(l[1]) + " in " +
           std::string(dtype_name(static_cast<DType>(l[2])));
  };
  return invalid_argument("the prefill and decode instances hold different KV caches: " + text(own) + " here, " + text(theirs) +
                          " there (serve the same model with the same --kv-type)");
}

PrefillInstance::PrefillInstance(const LlamaModel& model, KvCache cache, ThreadPool& pool, std::int64_t max_batch_tokens)
    : model_(model), cache_(std::move(cache)), pool_(pool), max_batch_tokens_(max_batch_tokens) {}

Status PrefillInstance::compute(const PrefillRequest& r, const Ship& ship, const std::function<bool()>& keep_going) {
  const auto n = static_cast<std::int64_t>(r.tokens.size());
  Batch batch;
  std::vector<float> logits;
  for (std::int64_t a = 0; a < n; a += max_batch_tokens_) {
    if (!keep_going()) return cancelled("the request was cancelled");
    const std::int64_t b = std::min(n, a + max_batch_tokens_);
    batch.clear();
    for (std::int64_t p = a; p < b; ++p) {
      batch.add(r.tokens[static_cast<std::size_t>(p)], static_cast<std::int32_t>(p), 0, false);
    }
    const std::int64_t first = std::max(a, r.from);
    LayerShipper shipper(cache_, r.id, first, std::max<std::int64_t>(0, b - first), ship);
    PEREGRINE_RETURN_IF_ERROR(model_.forward(batch, cache_, logits, pool_, 0, &shipper));
  }
  return Status::ok();
}

void PrefillInstance::run(const PrefillRequest& r, const Ship& ship, const std::function<bool()>& keep_going) {
  cache_.free_sequence(0);
  const Status st = compute(r, ship, keep_going);
  cache_.free_sequence(0);
  ship(end_message(r.id, st));
}

void KvReceiver::expect(std::uint64_t id, std::int32_t kv_seq, std::int64_t from, std::int64_t length, std::int64_t n_layers) {
  pending_[id] = Pending{kv_seq, from, length, std::vector<std::int64_t>(static_cast<std::size_t>(n_layers), 0), Status::ok()};
}

std::optional<std::pair<std::uint64_t, Status>> KvReceiver::apply(std::span<const std::uint8_t> message, KvCache& cache) {
  if (message.size() < sizeof(KvRowsHeader)) return std::nullopt;  // carries no id to fail
  const auto h = get<KvRowsHeader>(message, 0);
  const auto it = pending_.find(h.id);
  if (it == pending_.end()) return std::nullopt;
  Pending& p = it->second;
  const auto payload = message.subspan(sizeof(KvRowsHeader));
  const auto fail = [&](const char* what) {
    if (p.error.is_ok()) p.error = Status(ErrorCode::kInternal, std::string("K/V rows from the prefill instance: ") + what);
  };
  if (h.layer == kEndOfRequest) {
    const bool complete = std::all_of(p.rows.begin(), p.rows.end(), [&](std::int64_t n) { return n == p.length - p.from; });
    if (h.code < 0 || h.code > static_cast<std::int32_t>(ErrorCode::kInternal)) fail("an unknown error code");
    if (h.code == 0 && !complete) fail("a request ended before every layer's rows arrived");
    Status st = !p.error ? p.error
                : h.code == 0 ? Status::ok()
                              : Status(static_cast<ErrorCode>(h.code),
                                       "prefill instance: " + std::string(payload.begin(), payload.end()));
    if (st.is_ok()) cache.set_length(p.kv_seq, p.length);
    pending_.erase(it);
    return std::make_pair(h.id, std::move(st));
  }
  // Bounds checked without overflow: p.from <= first, n <= length - first, payload = 2 · n rows.
  const bool fits = h.layer >= 0 && h.layer < static_cast<std::int64_t>(p.rows.size()) && h.first >= p.from &&
                    h.first <= p.length && h.n > 0 && h.n <= p.length - h.first &&
                    payload.size() / 2 / static_cast<std::size_t>(cache.row_bytes()) == static_cast<std::size_t>(h.n) &&
                    payload.size() == 2 * static_cast<std::size_t>(h.n) * static_cast<std::size_t>(cache.row_bytes());
  if (!fits) {
    fail("a message that does not fit its request");
    return std::nullopt;
  }
  if (p.error.is_ok()) {
    cache.write_rows(p.kv_seq, h.layer, h.first, h.n, payload.data());
    p.rows[static_cast<std::size_t>(h.layer)] += h.n;
    bytes_ += static_cast<std::int64_t>(payload.size());
  }
  return std::nullopt;
}

}  // namespace peregrine
