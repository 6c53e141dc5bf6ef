#include "peregrine/kv/kv_cache.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cassert>
#include <cstring>
#include <limits>
#include <string>

#include "peregrine/quant/quantize_rtn.h"

namespace peregrine {
namespace {

// The KV dtypes, in the order the messages list them.
constexpr std::array<DType, 6> kKvTypes = {DType::kF32, DType::kF16, DType::kQ8_0, DType::kI8, DType::kF8E4M3, DType::kF8E5M2};
constexpr const char* kKvTypeNames = "f32, f16, q8_0, i8, f8_e4m3 or f8_e5m2";

std::int64_t kv_row_bytes(std::int64_t kv_dim, DType dtype) {
  return static_cast<std::int64_t>(dtype_row_bytes(dtype, static_cast<std::uint64_t>(kv_dim)).value_or(0));
}

Status check_options(const KvShape& shape, const KvCacheOptions& o) {
  if (o.n_blocks < 1) return invalid_argument("KV cache: the pool needs at least 1 block (got " + std::to_string(o.n_blocks) + ")");
  if (o.block_size < 1) return invalid_argument("KV cache: block size must be >= 1 (got " + std::to_string(o.block_size) + ")");
  if (std::find(kKvTypes.begin(), kKvTypes.end(), o.dtype) == kKvTypes.end()) {
    return invalid_argument("KV cache: dtype " + std::string(dtype_name(o.dtype)) + " is not one of " + kKvTypeNames);
  }
  for (std::int64_t l = 0; l < shape.n_layers; ++l) {
    if (shape.window(l) < 0) return invalid_argument("KV cache: layer " + std::to_string(l) + " has a negative sliding window");
  }
  if (!shape.layer_windows.empty() && static_cast<std::int64_t>(shape.layer_windows.size()) != shape.n_layers) {
    return invalid_argument("KV cache: " + std::to_string(shape.layer_windows.size()) + " layer windows for " +
                            std::to_string(shape.n_layers) + " layers");
  }
  if (o.dtype == DType::kQ8_0 && shape.kv_dim() % 32 != 0) {
    return invalid_argument("KV cache: q8_0 needs n_kv_heads * head_dim to be a multiple of 32 (it is " +
                            std::to_string(shape.kv_dim()) + ")");
  }
  // In double: n_blocks · block_size · kv_dim · layers can pass 2^63 for absurd requests.
  const double bytes = static_cast<double>(o.n_blocks) *
                       (2.0 * static_cast<double>(shape.n_layers) * static_cast<double>(o.block_size) *
                        static_cast<double>(kv_row_bytes(shape.kv_dim(), o.dtype)));
  const double ram = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGE_SIZE));
  if (ram > 0 && bytes > ram) {
    return out_of_range("a KV cache of " + std::to_string(o.n_blocks) + " blocks of " + std::to_string(o.block_size) +
                        " tokens needs " + std::to_string(bytes / (1 << 30)) +
                        " GiB, more than this machine's memory; use a smaller context or fewer blocks");
  }
  return Status::ok();
}

// Pool blocks touched by positions [begin, end): logical blocks [begin / bs, ceil(end / bs)).
std::pair<std::int64_t, std::int64_t> touched_blocks(std::int64_t begin, std::int64_t end, std::int32_t bs) {
  return {begin / bs, blocks_for_tokens(end, bs)};
}

}  // namespace

Expected<DType> parse_kv_type(std::string_view name) {
  for (DType t : kKvTypes) {
    if (name == dtype_name(t)) return t;
  }
  return invalid_argument("unknown KV cache type '" + std::string(name) + "' (expected " + kKvTypeNames + ")");
}

std::int64_t kv_block_bytes(const KvShape& shape, std::int32_t block_size, DType dtype) {
  return 2 * shape.n_layers * block_size * kv_row_bytes(shape.kv_dim(), dtype);
}

std::int64_t blocks_for_tokens(std::int64_t n_tokens, std::int32_t block_size) {
  return (n_tokens + block_size - 1) / block_size;
}

Expected<KvCache> KvCache::create(const KvShape& shape, const KvCacheOptions& options) {
  PEREGRINE_RETURN_IF_ERROR(check_options(shape, options));
  KvCache c;
  KvShape grouped = shape;
  if (!options.window_groups) grouped.layer_windows.clear();
  c.groups_ = kv_layer_groups(grouped);
  const std::int64_t pool_blocks = std::int64_t{options.n_blocks} * c.groups_.n_groups();
  if (pool_blocks > std::numeric_limits<std::int32_t>::max()) {
    return invalid_argument("KV cache: " + std::to_string(pool_blocks) + " group blocks are more than a pool can number");
  }
  c.n_layers_ = shape.n_layers;
  c.kv_dim_ = shape.kv_dim();
  c.row_bytes_ = kv_row_bytes(c.kv_dim_, options.dtype);
  c.block_size_ = options.block_size;
  c.dtype_ = options.dtype;
  c.pool_ = BlockPool(static_cast<std::int32_t>(pool_blocks));
  c.data_ = std::make_unique_for_overwrite<std::uint8_t[]>(
      static_cast<std::size_t>(options.n_blocks * kv_block_bytes(shape, options.block_size, options.dtype)));
  return c;
}

std::int32_t KvCache::block_size() const { return block_size_; }
DType KvCache::dtype() const { return dtype_; }
std::int64_t KvCache::kv_dim() const { return kv_dim_; }
std::int64_t KvCache::n_layers() const { return n_layers_; }
BlockPool& KvCache::pool() { return pool_; }
const BlockPool& KvCache::pool() const { return pool_; }

const KvCache::Sequence* KvCache::find(std::int32_t seq) const {
  const auto it = seqs_.find(seq);
  return it == seqs_.end() ? nullptr : &it->second;
}

bool KvCache::has_sequence(std::int32_t seq) const { return find(seq) != nullptr; }

std::int64_t KvCache::length(std::int32_t seq) const {
  const Sequence* s = find(seq);
  return s ? s->length : 0;
}

std::span<const std::int32_t> KvCache::block_table(std::int32_t seq, std::int32_t group) const {
  const Sequence* s = find(seq);
  if (s == nullptr || static_cast<std::size_t>(group) >= s->tables.size()) return {};
  return s->tables[static_cast<std::size_t>(group)];
}

std::vector<std::int32_t> KvCache::blocks_by_position(std::int32_t seq) const {
  const Sequence* s = find(seq);
  if (s == nullptr || s->tables.empty()) return {};
  const std::size_t n_groups = s->tables.size(), n = s->tables[0].size();
  std::vector<std::int32_t> out(n * n_groups);
  for (std::size_t g = 0; g < n_groups; ++g) {
    for (std::size_t i = 0; i < n; ++i) out[i * n_groups + g] = s->tables[g][i];
  }
  return out;
}

std::int64_t KvCache::held_blocks(std::int32_t seq, std::int32_t group) const {
  const std::span<const std::int32_t> table = block_table(seq, group);
  return static_cast<std::int64_t>(table.size() - static_cast<std::size_t>(std::count(table.begin(), table.end(), kReleasedBlock)));
}

// Blocks one group's `table` (of a sequence of `length` positions) takes from the pool to hold
// n_positions: new blocks, and copies of the shared ones the new positions touch.
std::int64_t KvCache::table_blocks_needed(std::span<const std::int32_t> table, std::int64_t length, std::int64_t n_positions) const {
  if (n_positions <= length) return 0;
  const auto [first, last] = touched_blocks(length, n_positions, block_size_);
  std::int64_t needed = 0;
  for (std::int64_t b = first; b < last; ++b) {
    const bool present = b < static_cast<std::int64_t>(table.size());
    if (!present || pool_.ref_count(table[static_cast<std::size_t>(b)]) > 1) ++needed;
  }
  return needed;
}

std::int64_t KvCache::blocks_needed(std::int32_t seq, std::int64_t n_positions) const {
  const Sequence* s = find(seq);
  std::int64_t needed = 0;
  for (std::int32_t g = 0; g < n_groups(); ++g) {
    needed += table_blocks_needed(block_table(seq, g), s ? s->length : 0, n_positions);
  }
  return needed;
}

// Allocates the blocks of positions [length, n_positions) in one group's table, copying shared
// ones first (copy-on-write). Precondition: the pool has the blocks (table_blocks_needed).
void KvCache::reserve_table(std::vector<std::int32_t>& table, std::int64_t length, std::int64_t n_positions) {
  const auto [first, last] = touched_blocks(length, n_positions, block_size_);
  for (std::int64_t b = first; b < last; ++b) {
    if (b == static_cast<std::int64_t>(table.size())) {
      table.push_back(*pool_.allocate());
      continue;
    }
    std::int32_t& id = table[static_cast<std::size_t>(b)];
    if (pool_.ref_count(id) == 1) continue;
    const std::int32_t copy = *pool_.allocate();  // copy-on-write of a shared block
    copy_block(id, copy);
    if (record_) update_.copies.emplace_back(id, copy);
    pool_.unref(id);
    id = copy;
  }
}

Status KvCache::reserve(std::int32_t seq, std::int64_t n_positions) {
  if (follower_) {
    if (static_cast<std::int64_t>(block_table(seq).size()) * block_size_ >= n_positions) return Status::ok();
    return Status(ErrorCode::kInternal, "KV cache: the followed table of sequence " + std::to_string(seq) +
                                            " does not cover " + std::to_string(n_positions) + " positions");
  }
  const std::int64_t needed = blocks_needed(seq, n_positions);
  if (needed > pool_.n_free()) {
    return resource_exhausted("KV cache: sequence " + std::to_string(seq) + " needs " + std::to_string(needed) +
                              " more blocks for " + std::to_string(n_positions) + " positions, " +
                              std::to_string(pool_.n_free()) + " are free");
  }
  Sequence& s = seqs_[seq];
  s.tables.resize(static_cast<std::size_t>(n_groups()));
  if (n_positions <= s.length) return Status::ok();
  for (std::vector<std::int32_t>& table : s.tables) reserve_table(table, s.length, n_positions);
  return Status::ok();
}

// Sets s's tables from a position-major list (blocks_by_position's layout).
void KvCache::set_tables(Sequence& s, std::span<const std::int32_t> by_position) const {
  const auto n_groups = static_cast<std::size_t>(this->n_groups());
  s.tables.assign(n_groups, {});
  for (std::size_t i = 0; i < by_position.size(); ++i) s.tables[i % n_groups].push_back(by_position[i]);
}

void KvCache::attach_prefix(std::int32_t seq, std::span<const std::int32_t> blocks, std::int64_t n_tokens) {
  assert(!has_sequence(seq) && n_tokens <= static_cast<std::int64_t>(blocks.size()) / n_groups() * block_size_);
  Sequence& s = seqs_[seq];
  set_tables(s, blocks);
  s.length = n_tokens;
}

void KvCache::truncate(std::int32_t seq, std::int64_t n) {
  const auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  Sequence& s = it->second;
  const auto keep = static_cast<std::size_t>(blocks_for_tokens(n, block_size_));
  for (std::vector<std::int32_t>& table : s.tables) {
    for (std::size_t b = keep; b < table.size(); ++b) {
      if (table[b] != kReleasedBlock) pool_.unref(table[b]);
    }
    table.resize(std::min(keep, table.size()));
  }
  s.length = std::min(s.length, n);
}

void KvCache::release_behind_window(std::int32_t seq, std::int64_t pos) {
  const auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  for (std::int32_t g = 0; g < n_groups(); ++g) {
    const std::int64_t window = group_window(g);
    if (window == 0) continue;
    std::vector<std::int32_t>& table = it->second.tables[static_cast<std::size_t>(g)];
    // Block b holds positions [b · bs, (b + 1) · bs): unseen when (b + 1) · bs <= pos - window + 1.
    // Released entries always form a prefix of the table, so walking back from the last unseen
    // block stops at the previous call's work: each step costs the blocks it releases.
    const std::int64_t unseen = std::min<std::int64_t>((pos - window + 1) / block_size_, static_cast<std::int64_t>(table.size()));
    for (std::int64_t b = unseen - 1; b >= 0 && table[static_cast<std::size_t>(b)] != kReleasedBlock; --b) {
      pool_.unref(table[static_cast<std::size_t>(b)]);
      table[static_cast<std::size_t>(b)] = kReleasedBlock;
    }
  }
}

void KvCache::fork(std::int32_t src, std::int32_t dst) {
  assert(has_sequence(src) && !has_sequence(dst));
  Sequence copy = seqs_.at(src);
  for (const std::vector<std::int32_t>& table : copy.tables) {
    for (std::int32_t id : table) {
      if (id != kReleasedBlock) pool_.ref(id);
    }
  }
  seqs_.emplace(dst, std::move(copy));
}

void KvCache::compact(std::int32_t seq, std::int64_t first, std::span<const std::int64_t> from) {
  const auto n = static_cast<std::int64_t>(from.size());
  for (std::int64_t j = 0; j < n; ++j) {
    const std::int64_t src = from[static_cast<std::size_t>(j)], dst = first + j;
    assert(src >= dst && src < length(seq));
    if (src == dst) continue;
    for (std::int64_t l = 0; l < n_layers_; ++l) {
      const KvLayerView k = k_view(seq, l);
      const std::int64_t src_off = k.row(src) - k.base, dst_off = k.row(dst) - k.base;
      for (int kv = 0; kv < 2; ++kv) {
        std::memcpy(slab(l, kv) + dst_off, slab(l, kv) + src_off, static_cast<std::size_t>(row_bytes_));
      }
    }
  }
  truncate(seq, first + n);
}

void KvCache::free_sequence(std::int32_t seq) {
  truncate(seq, 0);
  if (seqs_.erase(seq) > 0 && record_) update_.freed.push_back(seq);
}

KvCache::FollowerUpdate KvCache::take_follower_update(std::span<const std::int32_t> seqs) {
  FollowerUpdate u = std::exchange(update_, {});
  for (std::int32_t seq : seqs) {
    if (!u.tables.empty() && u.tables.back().seq == seq) continue;  // a sequence's rows are usually adjacent
    u.tables.push_back({seq, length(seq), blocks_by_position(seq)});
  }
  return u;
}

void KvCache::follow(const FollowerUpdate& u) {
  follower_ = true;
  for (std::int32_t seq : u.freed) seqs_.erase(seq);
  for (const auto& [from, to] : u.copies) copy_block(from, to);
  for (const FollowerUpdate::Table& t : u.tables) {
    Sequence& s = seqs_[t.seq];
    set_tables(s, t.blocks);
    s.length = t.length;
  }
}

std::uint8_t* KvCache::slab(std::int64_t layer, int kv) const {
  const std::int64_t slab_bytes = static_cast<std::int64_t>(pool_.n_blocks()) * block_size_ * row_bytes_;
  return data_.get() + (2 * groups_.layer_slot[static_cast<std::size_t>(layer)] + kv) * slab_bytes;
}

void KvCache::copy_block(std::int32_t from, std::int32_t to) {
  const std::int64_t block_bytes = block_size_ * row_bytes_;
  for (std::int64_t l = 0; l < groups_.layers_per_group; ++l) {  // layer l holds slot l
    for (int kv = 0; kv < 2; ++kv) {
      std::uint8_t* base = slab(l, kv);
      std::memcpy(base + to * block_bytes, base + from * block_bytes, static_cast<std::size_t>(block_bytes));
    }
  }
}

void KvCache::write(std::int32_t seq, std::int64_t layer, std::int64_t pos, const float* k, const float* v) {
  const KvLayerView kview = k_view(seq, layer);
  const std::int64_t offset = kview.row(pos) - kview.base;  // the same row in the V slab
  const auto n = static_cast<std::size_t>(kv_dim_);
  quantize_rtn(dtype_, std::span<const float>(k, n), slab(layer, 0) + offset);
  quantize_rtn(dtype_, std::span<const float>(v, n), slab(layer, 1) + offset);
}

void KvCache::read_rows(std::int32_t seq, std::int64_t layer, std::int64_t first, std::int64_t n, std::uint8_t* out) const {
  const KvLayerView views[2] = {k_view(seq, layer), v_view(seq, layer)};
  const auto bytes = static_cast<std::size_t>(row_bytes_);
  for (const KvLayerView& view : views) {
    for (std::int64_t p = first; p < first + n; ++p, out += bytes) std::memcpy(out, view.row(p), bytes);
  }
}

void KvCache::write_rows(std::int32_t seq, std::int64_t layer, std::int64_t first, std::int64_t n, const std::uint8_t* in) {
  const KvLayerView kview = k_view(seq, layer);
  const auto bytes = static_cast<std::size_t>(row_bytes_);
  for (int kv = 0; kv < 2; ++kv) {
    for (std::int64_t p = first; p < first + n; ++p, in += bytes) {
      std::memcpy(slab(layer, kv) + (kview.row(p) - kview.base), in, bytes);
    }
  }
}

void KvCache::set_length(std::int32_t seq, std::int64_t n) { seqs_[seq].length = n; }

KvLayerView KvCache::k_view(std::int32_t seq, std::int64_t layer) const {
  const std::span<const std::int32_t> table = block_table(seq, groups_.layer_group[static_cast<std::size_t>(layer)]);
  return KvLayerView{slab(layer, 0), table.empty() ? nullptr : table.data(), block_size_, dtype_, row_bytes_};
}

KvLayerView KvCache::v_view(std::int32_t seq, std::int64_t layer) const {
  KvLayerView view = k_view(seq, layer);
  view.base = slab(layer, 1);
  return view;
}

}  // namespace peregrine
