// quant_packed's group loops over one level's Block<Codes> (Q4_0Codes, Q8_0Codes, Block,
// kChunkTokens, kStreamTokens of the including namespace): included once per kernel level by
// quant_packed.cpp (AVX-512 VNNI) and quant_packed_avx2-inl.h (AVX2, AVX2 with AVX-VNNI).

// 16 rows × RN (2..kChunkTokens) tokens of one group, block by block (Block<Codes>::add).
template <class Codes, int RN>
void GroupTile(const Operands& op, std::int64_t group) {
  using K = Block<Codes>;
  constexpr std::size_t kGroupBlockBytes = K::kFormat.group_block_bytes();
  const std::uint8_t* codes = op.packed + static_cast<std::size_t>(group) * op.group_bytes();
  typename K::Acc acc[RN];
#pragma GCC unroll 8
  for (int t = 0; t < RN; ++t) acc[t] = K::zero();
  // With several tokens each block prefetches the next group's same block into L2, so that the
  // next group's DRAM read overlaps this group's compute; the hardware prefetcher alone left them
  // in series (Q4_0 tinyllama, same run: forwards of 4 / 8 / 16 / 24 / 32 rows 14 / 31 / 50 /
  // 62 / 76 -> 10 / 16 / 28 / 43 / 56 ms; one row unchanged at 9.1 ms). Past the matrix's end the
  // addresses are hints, never dereferenced.
  const std::size_t ahead = op.group_bytes();
  for (std::int64_t b = 0; b < op.blocks; ++b, codes += kGroupBlockBytes) {
    for (std::size_t line = 0; line < kGroupBlockBytes; line += 64) __builtin_prefetch(codes + ahead + line, 0, 2);
    K::template add<RN>(codes, op, b, acc);
  }
#pragma GCC unroll 8
  for (int t = 0; t < RN; ++t) K::store(op.y + t * op.out + group * 16, acc[t]);
}

// T tokens (1..kStreamTokens), S groups at once (group s is g + s·stride), each its own read
// stream prefetched kDecodePrefetchBytes ahead (decode_prefetch.h): per block each group's codes
// unpacked once and multiplied by every token's activations as in GroupTile.
template <class Codes, int S, int T>
void GroupStreams(const Operands& op, std::int64_t g, std::int64_t stride) {
  using K = Block<Codes>;
  constexpr std::size_t kGroupBlockBytes = K::kFormat.group_block_bytes();
  const std::uint8_t* codes[S];
  typename K::Acc acc[S][T];
#pragma GCC unroll 8
  for (int s = 0; s < S; ++s) {
    codes[s] = op.packed + static_cast<std::size_t>(g + s * stride) * op.group_bytes();
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) acc[s][t] = K::zero();
  }
  for (std::int64_t b = 0; b < op.blocks; ++b) {
#pragma GCC unroll 8
    for (int s = 0; s < S; ++s) {
      const std::uint8_t* block = codes[s] + static_cast<std::size_t>(b) * kGroupBlockBytes;
      prefetch_decode_stream<kGroupBlockBytes>(block);
      K::template add<T>(block, op, b, acc[s]);
    }
  }
#pragma GCC unroll 8
  for (int s = 0; s < S; ++s) {
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) K::store(op.y + t * op.out + (g + s * stride) * 16, acc[s][t]);
  }
}

// One group for up to kChunkTokens tokens of `op`.
template <class Codes>
void GroupTokens(const Operands& op, std::int64_t g) {
  if (op.n_tokens == 1) return GroupStreams<Codes, 1, 1>(op, g, 1);
  dispatch_count<2, kChunkTokens>(op.n_tokens, [&]<int kT>() { GroupTile<Codes, kT>(op, g); });
}

// Groups [g0, g1) of op's kT tokens as kStreams read streams (for_decode_streams).
template <int kStreams, int kT>
void StreamTiles(const Operands& op, std::int64_t g0, std::int64_t g1) {
  for_decode_streams<kStreams>(g0, g1, [&]<int S>(std::int64_t g, std::int64_t stride) {
    if (op.dtype == DType::kQ8_0) return GroupStreams<Q8_0Codes, S, kT>(op, g, stride);
    GroupStreams<Q4_0Codes, S, kT>(op, g, stride);
  });
}

// One token: kDecodeStreams groups side by side (decode_prefetch.h); 2..kStreamTokens: two.
// More: each group for all tokens, kChunkTokens at a time: the group's weights (16 rows) stay in
// L1/L2 between the token chunks, so DRAM sees them once.
void GemvGroups(const Operands& op, std::int64_t g0, std::int64_t g1) {
  if (op.n_tokens == 1) return StreamTiles<kDecodeStreams, 1>(op, g0, g1);
  if (op.n_tokens <= kStreamTokens) {
    dispatch_count<2, kStreamTokens>(op.n_tokens, [&]<int kT>() { StreamTiles<2, kT>(op, g0, g1); });
    return;
  }
  for (std::int64_t g = g0; g < g1; ++g) {
    for (std::int64_t t = 0; t < op.n_tokens; t += kChunkTokens) {
      Operands chunk = op;
      chunk.xq += t * op.blocks * 32;
      chunk.xd += t * op.blocks;
      chunk.bias += t * op.blocks;
      chunk.y += t * op.out;
      chunk.n_tokens = std::min<std::int64_t>(kChunkTokens, op.n_tokens - t);
      if (op.dtype == DType::kQ8_0) {
        GroupTokens<Q8_0Codes>(chunk, g);
      } else {
        GroupTokens<Q4_0Codes>(chunk, g);
      }
    }
  }
}
