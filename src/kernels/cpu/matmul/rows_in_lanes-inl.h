// AVX-512 helpers of the rows-in-lanes panel layout (16 weight rows, int32 lane e holding 4
// consecutive values of row panel_row(e)), shared by gemm_quant's and gemm_ggml's prefill GEMMs.
// Included inside their AVX3_DL sections (namespace peregrine::HWY_NAMESPACE::vnni), once per
// file, hence no include guard.

constexpr int kPanelRows = 16;

// Lane e of a panel holds row panel_row(e) (the order the 4×4 transposes produce); the map is
// its own inverse.
constexpr int panel_row(int e) { return 4 * (e % 4) + e / 4; }

// The 4×4 transpose of the 32-bit elements within each 128-bit lane of a, b, c, d.
HWY_INLINE void transpose4(__m512i& a, __m512i& b, __m512i& c, __m512i& d) {
  const __m512i t0 = _mm512_unpacklo_epi32(a, b), t1 = _mm512_unpackhi_epi32(a, b);
  const __m512i t2 = _mm512_unpacklo_epi32(c, d), t3 = _mm512_unpackhi_epi32(c, d);
  a = _mm512_unpacklo_epi64(t0, t2);
  b = _mm512_unpackhi_epi64(t0, t2);
  c = _mm512_unpacklo_epi64(t1, t3);
  d = _mm512_unpackhi_epi64(t1, t3);
}

// 16 bytes at `p` in each of 4 consecutive rows, one row per 128-bit lane.
HWY_INLINE __m512i four_rows(const std::uint8_t* p, std::size_t row_bytes) {
  const auto row = [&](std::size_t i) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i * row_bytes)); };
  __m512i z = _mm512_castsi128_si512(row(0));
  z = _mm512_inserti32x4(z, row(1), 1);  // the lane index must be an immediate (even at -Og)
  z = _mm512_inserti32x4(z, row(2), 2);
  return _mm512_inserti32x4(z, row(3), 3);
}

