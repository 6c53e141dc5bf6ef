#include "peregrine/kv/kv_cache.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cassert>
#include <cstring>
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
  c.n_layers_ = shape.n_layers;
  c.kv_dim_ = shape.kv_dim();
  c.row_bytes_ = kv_row_bytes(c.kv_dim_, options.dtype);
  c.block_size_ = options.block_size;
  c.dtype_ = options.dtype;
  c.pool_ = BlockPool(options.n_blocks);
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

std::span<const std::int32_t> KvCache::block_table(std::int32_t seq) const {
  const Sequence* s = find(seq);
  return s ? std::span<const std::int32_t>(s->blocks) : std::span<const std::int32_t>();
}

std::int64_t KvCache::blocks_needed(std::int32_t seq, std::int64_t n_positions) const {
  const Sequence* s = find(seq);
  const std::int64_t len = s ? s->length : 0;
  if (n_positions <= len) return 0;
  const auto [first, last] = touched_blocks(len, n_positions, block_size_);
  std::int64_t needed = 0;
  for (std::int64_t b = first; b < last; ++b) {
    const bool present = s && b < static_cast<std::int64_t>(s->blocks.size());
    if (!present || pool_.ref_count(s->blocks[static_cast<std::size_t>(b)]) > 1) ++needed;
  }
  return needed;
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
  if (n_positions <= s.length) return Status::ok();
  const auto [first, last] = touched_blocks(s.length, n_positions, block_size_);
  for (std::int64_t b = first; b < last; ++b) {
    if (b == static_cast<std::int64_t>(s.blocks.size())) {
      s.blocks.push_back(*pool_.allocate());
      continue;
    }
    std::int32_t& id = s.blocks[static_cast<std::size_t>(b)];
    if (pool_.ref_count(id) == 1) continue;
    const std::int32_t copy = *pool_.allocate();  // copy-on-write of a shared block
    copy_block(id, copy);
    if (record_) update_.copies.emplace_back(id, copy);
    pool_.unref(id);
    id = copy;
  }
  return Status::ok();
}

void KvCache::attach_prefix(std::int32_t seq, std::span<const std::int32_t> blocks, std::int64_t n_tokens) {
  assert(!has_sequence(seq) && n_tokens <= static_cast<std::int64_t>(blocks.size()) * block_size_);
  Sequence& s = seqs_[seq];
  s.blocks.assign(blocks.begin(), blocks.end());
  s.length = n_tokens;
}

void KvCache::truncate(std::int32_t seq, std::int64_t n) {
  const auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  Sequence& s = it->second;
  const auto keep = static_cast<std::size_t>(blocks_for_tokens(n, block_size_));
  for (std::size_t b = keep; b < s.blocks.size(); ++b) pool_.unref(s.blocks[b]);
  s.blocks.resize(std::min(keep, s.blocks.size()));
  s.length = std::min(s.length, n);
}

void KvCache::fork(std::int32_t src, std::int32_t dst) {
  assert(has_sequence(src) && !has_sequence(dst));
  Sequence copy = seqs_.at(src);
  for (std::int32_t id : copy.blocks) pool_.ref(id);
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
    const std::span<const std::int32_t> blocks = block_table(seq);
    u.tables.push_back({seq, length(seq), std::vector<std::int32_t>(blocks.begin(), blocks.end())});
  }
  return u;
}

void KvCache::follow(const FollowerUpdate& u) {
  follower_ = true;
  for (std::int32_t seq : u.freed) seqs_.erase(seq);
  for (const auto& [from, to] : u.copies) copy_block(from, to);
  for (const FollowerUpdate::Table& t : u.tables) seqs_[t.seq] = Sequence{t.blocks, t.length};
}

std::uint8_t* KvCache::slab(std::int64_t layer, int kv) const {
  const std::int64_t slab_bytes = static_cast<std::int64_t>(pool_.n_blocks()) * block_size_ * row_bytes_;
  return data_.get() + (2 * layer + kv) * slab_bytes;
}

void KvCache::copy_block(std::int32_t from, std::int32_t to) {
  const std::int64_t block_bytes = block_size_ * row_bytes_;
  for (std::int64_t l = 0; l < n_layers_; ++l) {
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
  const Sequence* s = find(seq);
  return KvLayerView{slab(layer, 0), s ? s->blocks.data() : nullptr, block_size_, dtype_, row_bytes_};
}

KvLayerView KvCache::v_view(std::int32_t seq, std::int64_t layer) const {
  KvLayerView view = k_view(seq, layer);
  view.base = slab(layer, 1);
  return view;
}

}  // namespace peregrine
