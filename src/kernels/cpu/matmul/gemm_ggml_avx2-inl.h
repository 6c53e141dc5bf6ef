// gemm_ggml's AVX2 kernels (Haswell, Zen 1-3, Intel client cores; also Highway's AVX3 target:
// AVX-512 CPUs without VNNI/VBMI): included in gemm_ggml.cpp's HWY_AVX2 / HWY_AVX3 section
// (namespace peregrine::HWY_NAMESPACE) by avx2_levels-inl.h, as namespace avx2 and on AVX2
// again with AVX-VNNI as avx2_vnni (PEREGRINE_AVX_VNNI: madd_add and dot_add below).
//
// Every row is read straight from its stored ggml blocks (no repacking), one row × a tile of
// up to kTileTokens tokens at a time: per 32 values and token one vpmaddubsw (codes ×
// activation bytes into int16 pairs; the codes are kept small enough that it cannot saturate)
// and one vpmaddwd (by the integer sub-block scales, or by ones) into int32 lanes — the
// arithmetic of ggml's AVX2 vec_dot_*_q8_K / q8_0 / q8_1. Decode (one token tile) decodes each
// super-group (256 values) or legacy block (32) in the tile that reads it. Prefill takes rows
// in blocks of kDecodedRows and runs every token tile over a block before the next block, so
// that a tile's activations stay in L1 / L2 across the block's rows and DRAM sees each row
// once; the integer-scaled formats decode the block's super-groups once into a per-thread
// buffer for all its token tiles (tinyllama Q4_K_M pp128 at AVX2, 2 threads, Zen 4, alternated:
// 92 -> 130 tok/s, about 20 of the 32 int8 MACs per cycle vpmaddubsw + vpmaddwd allow). A whole
// tile of 8 tokens finishes each super-group with the tokens as the lanes of one vector (one
// conversion and FMA for all 8) and its offsets in independent FMA chains (Zen 5, alternated:
// Q4_K_M 169 -> 193 tok/s, Q6_K 163 -> 175).

#if PEREGRINE_AVX_VNNI
namespace avx2_vnni {  // the same kernels with AVX-VNNI's vpdpwssd / vpdpbusd (IsaLevel::kAvx2Vnni)

// acc + Σ adjacent pairs of a·b (int16 lanes) in int32 lanes: vpdpwssd.
HWY_INLINE __m256i madd_add(__m256i acc, __m256i a, __m256i b) { return _mm256_dpwssd_avx_epi32(acc, a, b); }
// acc + Σ of 4 adjacent products u·s (unsigned × signed bytes) in int32 lanes: vpdpbusd.
HWY_INLINE __m256i dot_add(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_avx_epi32(acc, u, s); }
#else
namespace avx2 {

// acc + Σ adjacent pairs of a·b (int16 lanes) in int32 lanes: vpmaddwd, vpaddd.
HWY_INLINE __m256i madd_add(__m256i acc, __m256i a, __m256i b) { return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b)); }
// acc + Σ of 4 adjacent products u·s (unsigned × signed bytes) in int32 lanes: vpmaddubsw (the
// callers keep its int16 pair sums from saturating), vpmaddwd by ones, vpaddd.
HWY_INLINE __m256i dot_add(__m256i acc, __m256i u, __m256i s) {
  return madd_add(acc, _mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}
#endif

// Tokens per tile: 8 int32 sums live across a super-group beside its 8 code vectors.
constexpr std::int64_t kTileTokens = 8;

// 16 signed bytes as two vectors of 8 floats (lanes 0..7, 8..15).
HWY_INLINE void to_float(__m128i v, __m256 (&out)[2]) {
  out[0] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v));
  out[1] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(v, v)));
}

// One K-quant / IQ4_XS super-block in integer-scaled form: w_i = d·sc_s·v_i + b_s for the 16
// values s. v = u (0..63), or for kSigned formats (IQ4_XS) the signed grid value in `v` with
// u = |v| <= 127, whose signs go onto the activations (vpsignb) so that vpmaddubsw's unsigned
// operand stays u: 2·127·127 < 2^15. Q4_K / Q5_K (kOffsets32) have one offset per 32 values:
// b[0] lane c is the offset of values 32c .. 32c+31 and b[1] is unused.
struct IntScaled {
  __m256i u[8];  // codes of values 32c .. 32c+31
  __m256i v[8];  // kSigned only: the signed values
  __m128i sc;    // byte s: the signed integer scale of values 16s .. 16s+15
  float d;       // super-block scale
  __m256 b[2];   // lane s of b[s / 8]: the offset b_s
};

// 32 bytes at p.
HWY_INLINE __m256i load32(const std::uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// Byte-wise (v >> shift) & mask, 0 <= shift < 8 (16-bit shifts: the bits a byte takes from its
// neighbour are masked off by the caller's mask).
HWY_INLINE __m256i bits_of(__m256i v, int shift, int mask) {
  return _mm256_and_si256(_mm256_srli_epi16(v, shift), _mm256_set1_epi8(static_cast<char>(mask)));
}

// Bit `bit` of every byte of v moved to bit `to` (0 or the value 1 << to).
HWY_INLINE __m256i bit_to(__m256i v, int bit, int to) {
  const __m256i moved = bit >= to ? _mm256_srli_epi16(v, bit - to) : _mm256_slli_epi16(v, to - bit);
  return _mm256_and_si256(moved, _mm256_set1_epi8(static_cast<char>(1 << to)));
}

template <int kBits>
HWY_INLINE void int_qk_k(const std::uint8_t* block, IntScaled& out) {
  const auto& b = *reinterpret_cast<const ggml::BlockQ4_K*>(block);  // Q5_K shares the head
  std::uint64_t scales, mins;
  k4_scales(b.scales, scales, mins);
  const std::uint8_t* qs = block + (kBits == 5 ? sizeof(ggml::BlockQ5_K) : sizeof(ggml::BlockQ4_K)) - 128;
  for (int j = 0; j < 4; ++j) {  // 32 bytes: values 64j .. +31 (low nibbles), +32 .. +63 (high)
    const __m256i q = load32(qs + 32 * j);
    out.u[2 * j] = bits_of(q, 0, 0x0f);
    out.u[2 * j + 1] = bits_of(q, 4, 0x0f);
  }
  if constexpr (kBits == 5) {  // qh bit c: value 32c + i's fifth bit
    const __m256i qh = load32(block + 16);
    for (int c = 0; c < 8; ++c) out.u[c] = _mm256_or_si256(out.u[c], bit_to(qh, c, 4));
  }
  out.sc = pairs_of(scales);
  out.d = half(b.d);
  const __m256 m = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(mins))));
  out.b[0] = _mm256_mul_ps(_mm256_set1_ps(-half(b.dmin)), m);
  out.b[1] = _mm256_setzero_ps();
}

HWY_INLINE void int_q6_k(const std::uint8_t* block, IntScaled& out) {
  const auto& b = *reinterpret_cast<const ggml::BlockQ6_K*>(block);
  for (int n = 0; n < 2; ++n) {  // values 128n ..: ql[64n ..], qh[32n ..]
    const __m256i ql0 = load32(b.ql + 64 * n), ql1 = load32(b.ql + 64 * n + 32), qh = load32(b.qh + 32 * n);
    // chunk 4n + j: low nibbles of ql0 / ql1 (j = 0, 1) or high (2, 3), qh bits 2j, 2j + 1 → 4, 5.
    const __m256i high[4] = {_mm256_and_si256(_mm256_slli_epi16(qh, 4), _mm256_set1_epi8(0x30)),
                             _mm256_and_si256(_mm256_slli_epi16(qh, 2), _mm256_set1_epi8(0x30)),
                             _mm256_and_si256(qh, _mm256_set1_epi8(0x30)), bits_of(qh, 2, 0x30)};
    out.u[4 * n] = _mm256_or_si256(bits_of(ql0, 0, 0x0f), high[0]);
    out.u[4 * n + 1] = _mm256_or_si256(bits_of(ql1, 0, 0x0f), high[1]);
    out.u[4 * n + 2] = _mm256_or_si256(bits_of(ql0, 4, 0x0f), high[2]);
    out.u[4 * n + 3] = _mm256_or_si256(bits_of(ql1, 4, 0x0f), high[3]);
  }
  out.sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
  out.d = half(b.d);
  to_float(out.sc, out.b);
  const __m256 offset = _mm256_set1_ps(-32.0f * out.d);
  out.b[0] = _mm256_mul_ps(offset, out.b[0]);
  out.b[1] = _mm256_mul_ps(offset, out.b[1]);
}

HWY_INLINE void int_q2_k(const std::uint8_t* block, IntScaled& out) {
  const auto& b = *reinterpret_cast<const ggml::BlockQ2_K*>(block);
  for (int n = 0; n < 2; ++n) {  // chunk 4n + j: 2-bit field j of qs[32n ..]
    const __m256i q = load32(b.qs + 32 * n);
    for (int j = 0; j < 4; ++j) out.u[4 * n + j] = bits_of(q, 2 * j, 3);
  }
  const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)), low4 = _mm_set1_epi8(0x0f);
  out.sc = _mm_and_si128(sc, low4);
  out.d = half(b.d);
  to_float(_mm_and_si128(_mm_srli_epi16(sc, 4), low4), out.b);
  const __m256 dmin = _mm256_set1_ps(-half(b.dmin));
  out.b[0] = _mm256_mul_ps(dmin, out.b[0]);
  out.b[1] = _mm256_mul_ps(dmin, out.b[1]);
}

HWY_INLINE void int_q3_k(const std::uint8_t* block, IntScaled& out) {
  const auto& b = *reinterpret_cast<const ggml::BlockQ3_K*>(block);
  const __m256i hm = load32(b.hmask);
  for (int n = 0; n < 2; ++n) {  // chunk c = 4n + j: 2-bit field j of qs[32n ..], hmask bit c → bit 2
    const __m256i q = load32(b.qs + 32 * n);
    for (int j = 0; j < 4; ++j) out.u[4 * n + j] = _mm256_or_si256(bits_of(q, 2 * j, 3), bit_to(hm, 4 * n + j, 2));
  }
  out.sc = q3_k_scales(b);
  out.d = half(b.d);
  to_float(out.sc, out.b);
  const __m256 offset = _mm256_set1_ps(-4.0f * out.d);
  out.b[0] = _mm256_mul_ps(offset, out.b[0]);
  out.b[1] = _mm256_mul_ps(offset, out.b[1]);
}

// 16 legacy-ordered nibble bytes (value j: low nibble of byte j, j + 16: high) as 32 codes.
HWY_INLINE __m256i legacy_nibbles(const std::uint8_t* qs) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)), low4 = _mm_set1_epi8(0x0f);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), low4), _mm_and_si128(q, low4));
}

// IQ4's signed grid value of each nibble code.
HWY_INLINE __m256i iq4_values(__m256i nibbles) {
  const __m128i grid = _mm_loadu_si128(reinterpret_cast<const __m128i*>(ggml::kIq4nlValues));
  return _mm256_shuffle_epi8(_mm256_set_m128i(grid, grid), nibbles);
}

HWY_INLINE void int_iq4_xs(const std::uint8_t* block, IntScaled& out) {
  const auto& b = *reinterpret_cast<const ggml::BlockIq4Xs*>(block);
  for (int c = 0; c < 8; ++c) {
    out.v[c] = iq4_values(legacy_nibbles(b.qs + 16 * c));
    out.u[c] = _mm256_abs_epi8(out.v[c]);
  }
  std::uint64_t scales = 0;  // ggml::iq4_xs_scale of the 8 sub-blocks of 32, minus 32
  const unsigned high = b.scales_h[0] | b.scales_h[1] << 8;
  for (int i = 0; i < 8; ++i) {
    const unsigned s = ((b.scales_l[i / 2] >> 4 * (i % 2)) & 0x0f) | ((high >> 2 * i) & 3) << 4;
    scales |= std::uint64_t{static_cast<std::uint8_t>(s - 32)} << 8 * i;
  }
  out.sc = pairs_of(scales);
  out.d = half(b.d);
  out.b[0] = out.b[1] = _mm256_setzero_ps();
}

// The int16 scales of chunk c's vpmaddubsw pairs: lanes 0..7 (values 32c .. +15) sc_{2c},
// lanes 8..15 sc_{2c+1}. sc16: the 16 scales as int16 (lanes 0..7 in the low 128 bits).
HWY_INLINE __m256i chunk_scales(__m256i sc16, int c) {
  const __m256i half16 = c < 4 ? _mm256_permute2x128_si256(sc16, sc16, 0x00) : _mm256_permute2x128_si256(sc16, sc16, 0x11);
  const char lo = static_cast<char>(4 * (c % 4)), hi = static_cast<char>(4 * (c % 4) + 2);
  const __m256i pick = _mm256_setr_epi8(lo, lo + 1, lo, lo + 1, lo, lo + 1, lo, lo + 1, lo, lo + 1, lo, lo + 1, lo,
                                        lo + 1, lo, lo + 1, hi, hi + 1, hi, hi + 1, hi, hi + 1, hi, hi + 1, hi,
                                        hi + 1, hi, hi + 1, hi, hi + 1, hi, hi + 1);
  return _mm256_shuffle_epi8(half16, pick);
}

HWY_INLINE float horizontal_sum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

// A super-group as the tiles read it, decoded in place (decode: one token tile per row): per
// chunk c (values 32c .. 32c+31) the codes (u, or for kSigned formats the signed values v,
// u = |v|) and the int16 scales of its vpmaddubsw pairs, shuffled as they are read.
template <class D>
struct DecodedGroup {
  IntScaled k;
  __m256i sc16;
  HWY_INLINE explicit DecodedGroup(const std::uint8_t* block) {
    D::decode_int(block, k);
    sc16 = _mm256_cvtepi8_epi16(k.sc);
  }
  HWY_INLINE __m256i code(int c) const { return D::kSigned ? k.v[c] : k.u[c]; }
  HWY_INLINE __m256i scale(int c) const { return chunk_scales(sc16, c); }
  HWY_INLINE float d() const { return k.d; }
  // Offsets 8h .. 8h+7.
  HWY_INLINE __m256 b(int h) const { return k.b[h]; }
  // Offset s (lane s % 8 of b[s / 8]) in every lane.
  HWY_INLINE __m256 offset(int s) const { return _mm256_permutevar8x32_ps(k.b[s / 8], _mm256_set1_epi32(s % 8)); }
};

// The same, stored (prefill: a row block's super-groups decoded once for every token tile).
struct StoredGroup {
  __m256i q[8];
  __m256i s[8];
  alignas(32) float offsets[16];
  float scale_d;

  template <class D>
  HWY_INLINE explicit StoredGroup(const DecodedGroup<D>& g) : scale_d(g.d()) {
    for (int c = 0; c < 8; ++c) {
      q[c] = g.code(c);
      s[c] = g.scale(c);
    }
    _mm256_store_ps(offsets, g.b(0));
    _mm256_store_ps(offsets + 8, g.b(1));
  }
  HWY_INLINE __m256i code(int c) const { return q[c]; }
  HWY_INLINE __m256i scale(int c) const { return s[c]; }
  HWY_INLINE float d() const { return scale_d; }
  HWY_INLINE __m256 b(int h) const { return _mm256_load_ps(offsets + 8 * h); }
  HWY_INLINE __m256 offset(int s) const { return _mm256_broadcast_ss(offsets + s); }
};

// A token tile's Q8_K activation scales in the order the tiles read them: per super-group, the
// scale dx, the 16 scaled sums sum16 and their pairs sum32 (the sums of 32 values, which the
// per-32 offsets of Q4_K / Q5_K weigh) of each of the tile's tokens (GgmlActivations' own
// layout puts every token's on its own row: 8 pointers, more than the registers hold); for
// whole tiles also token-minor (sum16t[s][n], sum32t[c][n]: one vector per offset).
struct TileScales {
  float dx[kTileTokens];
  float sum16[kTileTokens][16];
  float sum32[kTileTokens][8];
  float sum16t[16][kTileTokens];
  float sum32t[8][kTileTokens];
};

// out[g] for g < op.groups: tokens [token, token + n) of the activations.
HWY_INLINE void gather_tile_scales(const Operands& op, std::int64_t token, std::int64_t n, TileScales* out) {
  const GgmlActivations& x = *op.x;
  for (std::int64_t g = 0; g < op.groups; ++g) {
    for (std::int64_t i = 0; i < n; ++i) {
      out[g].dx[i] = x.dx[static_cast<std::size_t>((token + i) * x.ld / 4 + 64 * g)];
      std::memcpy(out[g].sum16[i], x.sum16.data() + (token + i) * x.ld / 16 + 16 * g, sizeof out[g].sum16[i]);
      for (int c = 0; c < 8; ++c) out[g].sum32t[c][i] = out[g].sum32[i][c] = out[g].sum16[i][2 * c] + out[g].sum16[i][2 * c + 1];
      for (int s = 0; s < 16; ++s) out[g].sum16t[s][i] = out[g].sum16[i][s];
    }
  }
}

// The int32 lane sums of 8 vectors as the 8 lanes of one: lane n = Σ of v[n]'s lanes.
HWY_INLINE __m256i lane_sums(const __m256i (&v)[8]) {
  // Per 128-bit half: (a0+a2, b0+b2, a1+a3, b1+b3), then (A, B, C, D) partial sums.
  const auto pairs = [](__m256i a, __m256i b) {
    return _mm256_add_epi32(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b));
  };
  const auto quads = [](__m256i a, __m256i b) {
    return _mm256_add_epi32(_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b));
  };
  const __m256i low = quads(pairs(v[0], v[1]), pairs(v[2], v[3])), high = quads(pairs(v[4], v[5]), pairs(v[6], v[7]));
  return _mm256_add_epi32(_mm256_permute2x128_si256(low, high, 0x20), _mm256_permute2x128_si256(low, high, 0x31));
}

// Independent f32 sums of a whole tile (lane n: token n) that together make its outputs:
// acc[0] takes the dot products, acc[1 + s % 4] offset s (one FMA chain would wait 4 cycles
// on each of its 9-17 FMAs per super-group).
constexpr int kTileSums = 5;

// One super-group's terms added to a whole tile's sums: the tokens' int32 sums isum converted
// and scaled by d·dx, and the offsets b·sum (one vector per offset).
template <class D, class Group>
HWY_INLINE void tile_epilogue(const Group& k, const __m256i (&isum)[kTileTokens], const TileScales& ts,
                              __m256 (&acc)[kTileSums]) {
  const __m256 dx = _mm256_mul_ps(_mm256_set1_ps(k.d()), _mm256_loadu_ps(ts.dx));
  acc[0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lane_sums(isum)), dx, acc[0]);
  if constexpr (D::kOffsets32) {
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) acc[1 + c % 4] = _mm256_fmadd_ps(k.offset(c), _mm256_loadu_ps(ts.sum32t[c]), acc[1 + c % 4]);
  } else if constexpr (!D::kSigned) {
#pragma GCC unroll 16
    for (int s = 0; s < 16; ++s) acc[1 + s % 4] = _mm256_fmadd_ps(k.offset(s), _mm256_loadu_ps(ts.sum16t[s]), acc[1 + s % 4]);
  }
}

// y[token .. token+RN, row] for an integer-scaled format D with Q8_K activations (one scale
// per super-group and token): per super-group the exact int32 Σ_s sc_s·(u·q)_s per token, then
// one conversion and FMA by d·dx, and the offsets b·sum16 (b·sum32) in f32: per token, or for
// a whole tile by tile_epilogue with the tokens as lanes. group_at(g): the row's
// super-group g (a DecodedGroup<D> or a const StoredGroup&); scales: the tile's TileScales,
// one per super-group.
template <class D, int RN, class GroupAt>
HWY_INLINE void int_row_tile(const Operands& op, std::int64_t row, std::int64_t token, const TileScales* scales,
                             GroupAt group_at) {
  const GgmlActivations& x = *op.x;
  __m256 acc[RN], sums[kTileSums];  // per token (RN < kTileTokens), per whole tile
  for (int n = 0; n < RN; ++n) acc[n] = _mm256_setzero_ps();
  for (int i = 0; i < kTileSums; ++i) sums[i] = _mm256_setzero_ps();
  for (std::int64_t g = 0; g < op.groups; ++g) {
    const auto& k = group_at(g);
    const std::int8_t* q = x.q.data() + token * x.ld + g * kSuperGroup;
    __m256i isum[RN];
    for (int n = 0; n < RN; ++n) isum[n] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) {
      const __m256i code = k.code(c), scale = k.scale(c), u = D::kSigned ? _mm256_abs_epi8(code) : code;
#pragma GCC unroll 8
      for (int n = 0; n < RN; ++n) {
        __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + n * x.ld + 32 * c));
        if constexpr (D::kSigned) xq = _mm256_sign_epi8(xq, code);
        isum[n] = madd_add(isum[n], _mm256_maddubs_epi16(u, xq), scale);
        // Sum in this order: left free, GCC reassociates the int32 sums and keeps all 64
        // products of the super-group alive at once, spilled to the stack (3x slower).
        asm("" : "+x"(isum[n]));
      }
    }
    const TileScales& ts = scales[g];
    if constexpr (RN == kTileTokens) {
      tile_epilogue<D>(k, isum, ts, sums);
      continue;
    }
#pragma GCC unroll 8
    for (int n = 0; n < RN; ++n) {
      acc[n] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[n]), _mm256_set1_ps(k.d() * ts.dx[n]), acc[n]);
      if constexpr (D::kOffsets32) {
        acc[n] = _mm256_fmadd_ps(k.b(0), _mm256_loadu_ps(ts.sum32[n]), acc[n]);
      } else if constexpr (!D::kSigned) {
        acc[n] = _mm256_fmadd_ps(k.b(0), _mm256_loadu_ps(ts.sum16[n]), acc[n]);
        acc[n] = _mm256_fmadd_ps(k.b(1), _mm256_loadu_ps(ts.sum16[n] + 8), acc[n]);
      }
    }
  }
  if constexpr (RN == kTileTokens) {
    alignas(32) float y[kTileTokens];
    _mm256_store_ps(y, _mm256_add_ps(_mm256_add_ps(sums[0], sums[1]),
                                     _mm256_add_ps(_mm256_add_ps(sums[2], sums[3]), sums[4])));
    for (int n = 0; n < RN; ++n) op.y[(token + n) * op.out + row] = y[n];
    return;
  }
  for (int n = 0; n < RN; ++n) op.y[(token + n) * op.out + row] = horizontal_sum(acc[n]);
}

// Per-thread buffers of n T's, reused across calls.
template <class T>
T* thread_buffer(std::size_t n) {
  thread_local hwy::AlignedFreeUniquePtr<T[]> buffer;
  thread_local std::size_t capacity = 0;
  if (capacity < n) buffer = hwy::AllocateAligned<T>(capacity = n);
  return buffer.get();
}

// Rows [row_begin, row_end) for every token. One token tile (decode): each row's super-groups
// decoded in the tile that reads them. More: rows in blocks of kDecodedRows, each block's
// super-groups decoded once into a per-thread buffer (kDecodedRows·groups StoredGroups, 608 bytes
// each: L2-resident), then every token tile over the block's rows, so that a tile's activations
// stay in L1 / L2 across the block.
constexpr std::int64_t kDecodedRows = 16;

template <class D>
void int_tiled_rows(const Operands& op, std::int64_t row_begin, std::int64_t row_end) {
  const std::int64_t n_tokens = op.x->n_tokens, n_tiles = (n_tokens + kTileTokens - 1) / kTileTokens;
  TileScales* scales = thread_buffer<TileScales>(static_cast<std::size_t>(n_tiles * op.groups));
  for (std::int64_t i = 0; i < n_tiles; ++i) {
    gather_tile_scales(op, i * kTileTokens, std::min(kTileTokens, n_tokens - i * kTileTokens), scales + i * op.groups);
  }
  const auto tile = [&](std::int64_t row, std::int64_t i, auto group_at) {
    dispatch_count<1, kTileTokens>(std::min(kTileTokens, n_tokens - i * kTileTokens), [&]<int RN>() {
      int_row_tile<D, RN>(op, row, i * kTileTokens, scales + i * op.groups, group_at);
    });
  };
  if (n_tiles == 1) {
    for (std::int64_t row = row_begin; row < row_end; ++row) {
      tile(row, 0, [&](std::int64_t g) {
        prefetch_decode_stream<192>(op.group(row, g));
        return DecodedGroup<D>(op.group(row, g));
      });
    }
    return;
  }
  StoredGroup* stored = thread_buffer<StoredGroup>(static_cast<std::size_t>(kDecodedRows * op.groups));
  for (std::int64_t r0 = row_begin; r0 < row_end; r0 += kDecodedRows) {
    const std::int64_t r1 = std::min(row_end, r0 + kDecodedRows);
    for (std::int64_t row = r0; row < r1; ++row) {
      for (std::int64_t g = 0; g < op.groups; ++g) {
        prefetch_decode_stream<192>(op.group(row, g));
        new (stored + (row - r0) * op.groups + g) StoredGroup(DecodedGroup<D>(op.group(row, g)));
      }
    }
    for (std::int64_t i = 0; i < n_tiles; ++i) {
      for (std::int64_t row = r0; row < r1; ++row) {
        const StoredGroup* groups = stored + (row - r0) * op.groups;
        tile(row, i, [groups](std::int64_t g) -> const StoredGroup& { return groups[g]; });
      }
    }
  }
}

// A legacy block of 32 decoded: codes u (and for IQ4_NL the signed values v, u = |v|), scale
// a and offset b (w = a·u + b, or a·v for IQ4_NL).
struct LegacyBlock {
  __m256i u, v;
  float a, b;
};

// Q5's fifth bits: byte j of the result = 16 where bit j of the 32 bits is set.
HWY_INLINE __m256i fifth_bits(const std::uint8_t* qh) {
  std::uint32_t bits;
  std::memcpy(&bits, qh, 4);
  // Byte j takes byte j / 8 of the bits, then tests its bit j % 8.
  const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)),
                                             _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303));
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(16));
}

template <class Block>
HWY_INLINE void decode_legacy_block(const Block& blk, LegacyBlock& out) {
  constexpr bool kHigh = requires(const Block& x) { x.qh; };
  constexpr bool kMin = requires(const Block& x) { x.m; };
  constexpr bool kIq4 = std::is_same_v<Block, ggml::BlockIq4Nl>;
  out.u = legacy_nibbles(blk.qs);
  if constexpr (kHigh) out.u = _mm256_or_si256(out.u, fifth_bits(blk.qh));
  if constexpr (kIq4) {
    out.v = iq4_values(out.u);
    out.u = _mm256_abs_epi8(out.v);
  }
  out.a = half(blk.d);
  if constexpr (kMin) {
    out.b = half(blk.m);
  } else {
    out.b = kIq4 ? 0.0f : -16.0f * out.a;
  }
}

// y[token .. token+RN, row] for a legacy format of 32-value blocks (Q4_1, Q5_0, Q5_1, IQ4_NL):
// per block and token Σu·q (int32 lanes) converted and scaled by a·dx, plus b·Σq_x.
template <class Block, int RN>
void legacy_row_tile(const Operands& op, std::int64_t row, std::int64_t token) {
  constexpr bool kIq4 = std::is_same_v<Block, ggml::BlockIq4Nl>;
  const GgmlActivations& x = *op.x;
  const auto* blocks = reinterpret_cast<const Block*>(op.w + static_cast<std::size_t>(row) * op.row_bytes);
  const std::int64_t n_blocks = x.in / 32;
  __m256 acc[RN];
  float offsets[RN] = {};
  for (int n = 0; n < RN; ++n) acc[n] = _mm256_setzero_ps();
  for (std::int64_t k = 0; k < n_blocks; ++k) {
    if (k % 8 == 0) prefetch_decode_stream<8 * sizeof(Block)>(blocks + k);
    LegacyBlock blk;
    decode_legacy_block(blocks[k], blk);
#pragma GCC unroll 8
    for (int n = 0; n < RN; ++n) {
      const std::int64_t t = token + n;
      __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q.data() + t * x.ld + 32 * k));
      if constexpr (kIq4) xq = _mm256_sign_epi8(xq, blk.v);
      const __m256i dot = dot_add(_mm256_setzero_si256(), blk.u, xq);
      const float dx = x.dx[static_cast<std::size_t>(t * x.ld / 4 + 8 * k)];
      acc[n] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(blk.a * dx), acc[n]);
      if constexpr (!kIq4) {
        const float* s16 = x.sum16.data() + t * x.ld / 16 + 2 * k;
        offsets[n] += blk.b * (s16[0] + s16[1]);
      }
    }
  }
  for (int n = 0; n < RN; ++n) op.y[(token + n) * op.out + row] = horizontal_sum(acc[n]) + offsets[n];
}

// Rows [row_begin, row_end) for every token, in tiles of one row × up to kTileTokens tokens:
// rows in blocks of kDecodedRows, every token tile over a block before the next block.
template <template <int> class Tile>
void tiled_rows(const Operands& op, std::int64_t row_begin, std::int64_t row_end) {
  const std::int64_t n_tokens = op.x->n_tokens;
  for (std::int64_t r0 = row_begin; r0 < row_end; r0 += kDecodedRows) {
    for (std::int64_t t = 0; t < n_tokens; t += kTileTokens) {
      for (std::int64_t row = r0; row < std::min(row_end, r0 + kDecodedRows); ++row) {
        dispatch_count<1, kTileTokens>(std::min(kTileTokens, n_tokens - t), [&]<int RN>() { Tile<RN>::run(op, row, t); });
      }
    }
  }
}

template <class Block>
struct LegacyTile {
  template <int RN>
  struct With {
    static void run(const Operands& op, std::int64_t row, std::int64_t token) {
      legacy_row_tile<Block, RN>(op, row, token);
    }
  };
};

// The integer-scaled decoders (as the AVX-512 code's IntDecoder).
template <void (*kInt)(const std::uint8_t*, IntScaled&), bool kSign = false, bool kPer32 = false>
struct IntDecoder {
  static constexpr bool kSigned = kSign;
  static constexpr bool kOffsets32 = kPer32;
  static HWY_INLINE void decode_int(const std::uint8_t* p, IntScaled& out) { kInt(p, out); }
};

// The formats with AVX2 kernels; false: the caller takes the portable path (K-quant rows
// against 32-value activation blocks, which only the tests make).
template <class D>
bool int_rows(const Operands& op, std::int64_t row_begin, std::int64_t row_end) {
  if (op.x->block != kSuperGroup) return false;
  int_tiled_rows<D>(op, row_begin, row_end);
  return true;
}
template <class Block>
bool legacy_rows(const Operands& op, std::int64_t row_begin, std::int64_t row_end) {
  tiled_rows<LegacyTile<Block>::template With>(op, row_begin, row_end);
  return true;
}

bool rows(const Operands& op, std::int64_t row_begin, std::int64_t row_end) {
  switch (op.dtype) {
    case DType::kQ4_K: return int_rows<IntDecoder<int_qk_k<4>, false, true>>(op, row_begin, row_end);
    case DType::kQ5_K: return int_rows<IntDecoder<int_qk_k<5>, false, true>>(op, row_begin, row_end);
    case DType::kQ6_K: return int_rows<IntDecoder<int_q6_k>>(op, row_begin, row_end);
    case DType::kQ3_K: return int_rows<IntDecoder<int_q3_k>>(op, row_begin, row_end);
    case DType::kQ2_K: return int_rows<IntDecoder<int_q2_k>>(op, row_begin, row_end);
    case DType::kIQ4_XS: return int_rows<IntDecoder<int_iq4_xs, true>>(op, row_begin, row_end);
    case DType::kIQ4_NL: return legacy_rows<ggml::BlockIq4Nl>(op, row_begin, row_end);
    case DType::kQ4_1: return legacy_rows<ggml::BlockQ4_1>(op, row_begin, row_end);
    case DType::kQ5_0: return legacy_rows<ggml::BlockQ5_0>(op, row_begin, row_end);
    case DType::kQ5_1: return legacy_rows<ggml::BlockQ5_1>(op, row_begin, row_end);
    default: return false;
  }
}

}  // namespace avx2
