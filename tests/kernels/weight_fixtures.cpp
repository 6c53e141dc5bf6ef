#include "weight_fixtures.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "peregrine/quant/fp16.h"
#include "peregrine/quant/fp8.h"
#include "peregrine/quant/unpack_int8.h"

namespace peregrine::test {

GuardedBytes::GuardedBytes(std::size_t n) : size_(n) {
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::size_t data_pages = (n + page - 1) / page, total = (data_pages + 1) * page;
  void* base = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) std::abort();
  auto* bytes = static_cast<std::uint8_t*>(base);
  if (mprotect(bytes + data_pages * page, page, PROT_NONE) != 0) std::abort();
  mapping_ = std::shared_ptr<void>(base, [total](void* p) { munmap(p, total); });
  data_ = bytes + data_pages * page - n;
}

namespace {

TensorView view_of(DType t, std::int64_t out, std::int64_t in, const GuardedBytes& bytes, QuantParams p = {}) {
  return TensorView{std::string("w"), t, {out, in}, bytes.data(), bytes.size(), p};
}

}  // namespace

StoredWeights random_int_weights(std::int64_t out, std::int64_t in, const QuantParams& p, std::mt19937& rng) {
  const std::size_t rb = *row_bytes(DType::kInt, p, static_cast<std::uint64_t>(in));
  GuardedBytes bytes(rb * static_cast<std::size_t>(out));
  std::uniform_int_distribution<int> byte(0, 255), octave(-12, 2), zero(0, (1 << p.bits) - 1);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  const std::int64_t groups = (in + p.group_size - 1) / p.group_size;
  for (std::int64_t o = 0; o < out; ++o) {
    std::uint8_t* row = bytes.data() + static_cast<std::size_t>(o) * rb;
    for (std::int64_t g = 0; g < groups; ++g) {
      const std::uint16_t s = f32_to_f16(std::ldexp(mantissa(rng), octave(rng)));
      std::memcpy(row + 2 * g, &s, sizeof s);
      if (p.asymmetric) row[2 * groups + g] = static_cast<std::uint8_t>(zero(rng));
    }
    const std::size_t header = static_cast<std::size_t>(groups) * (p.asymmetric ? 3 : 2);
    for (std::size_t b = header; b < rb; ++b) row[b] = static_cast<std::uint8_t>(byte(rng));
  }
  const TensorView v = view_of(DType::kInt, out, in, bytes, p);
  return {bytes, v};
}

StoredWeights random_fp8_weights(DType t, std::int64_t out, std::int64_t in, std::mt19937& rng) {
  const std::size_t rb = *dtype_row_bytes(t, static_cast<std::uint64_t>(in));
  GuardedBytes bytes(rb * static_cast<std::size_t>(out));
  std::uniform_int_distribution<int> byte(0, 255), octave(-20, 4);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  auto finite = [t](std::uint8_t c) {
    return std::isfinite(t == DType::kF8E4M3 ? fp8_e4m3_to_f32(c) : fp8_e5m2_to_f32(c));
  };
  for (std::int64_t o = 0; o < out; ++o) {
    std::uint8_t* row = bytes.data() + static_cast<std::size_t>(o) * rb;
    const float s = std::ldexp(mantissa(rng), octave(rng)) * (byte(rng) < 128 ? -1.0f : 1.0f);
    std::memcpy(row, &s, sizeof s);
    for (std::size_t b = kRowScaleBytes; b < rb; ++b) {
      std::uint8_t c;
      do c = static_cast<std::uint8_t>(byte(rng)); while (!finite(c));
      row[b] = c;
    }
  }
  const TensorView v = view_of(t, out, in, bytes);
  return {bytes, v};
}

StoredWeights random_half_weights(DType t, std::int64_t out, std::int64_t in, std::mt19937& rng) {
  GuardedBytes bytes(static_cast<std::size_t>(out * in) * 2);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (std::size_t e = 0; e < bytes.size() / 2; ++e) {
    const std::uint16_t half = t == DType::kF16 ? f32_to_f16(normal(rng)) : f32_to_bf16(normal(rng));
    std::memcpy(bytes.data() + 2 * e, &half, 2);
  }
  const TensorView v = view_of(t, out, in, bytes);
  return {bytes, v};
}

double f32_gamma(double k) {
  const double u = std::ldexp(1.0, -24);
  return k * u / (1.0 - k * u);
}

BlockWeights random_block_weights(DType t, std::int64_t out, std::int64_t in, std::size_t offset, std::mt19937& rng) {
  const std::size_t block_bytes = dtype_block_bytes(t);
  const std::size_t n_blocks = static_cast<std::size_t>(out * in / 32);
  BlockWeights w;
  w.storage.resize(offset + n_blocks * block_bytes);
  std::uniform_int_distribution<int> byte(0, 255), octave(-12, 2);
  std::uniform_real_distribution<float> mantissa(0.5f, 1.0f);
  for (std::size_t b = 0; b < n_blocks; ++b) {
    std::uint8_t* block = w.storage.data() + offset + b * block_bytes;
    const std::uint16_t d = f32_to_f16(std::ldexp(mantissa(rng), octave(rng)) * (byte(rng) < 128 ? -1.0f : 1.0f));
    std::memcpy(block, &d, 2);
    for (std::size_t j = 2; j < block_bytes; ++j) block[j] = static_cast<std::uint8_t>(byte(rng));
  }
  w.view = TensorView{std::string("w"), t, {out, in}, w.storage.data() + offset, n_blocks * block_bytes, {}};
  return w;
}

std::vector<float> random_activations(std::int64_t n_tokens, std::int64_t in, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(n_tokens * in));
  for (auto& v : x) v = normal(rng);
  return x;
}

double term_magnitude(const TensorView& w, const QuantizedActivations& xq, std::int64_t row, std::int64_t token) {
  const std::int64_t blocks = xq.in / 32;
  const auto* wb = static_cast<const std::uint8_t*>(w.data) + row * blocks * dtype_block_bytes(w.dtype);
  std::int8_t q[32];
  double m = 0.0;
  for (std::int64_t b = 0; b < blocks; ++b) {
    const double d = unpack_block_int8(w.dtype, wb + b * dtype_block_bytes(w.dtype), q);
    double s = 0.0;
    for (int j = 0; j < 32; ++j) s += std::abs(q[j] * xq.q[static_cast<std::size_t>(token * xq.in + b * 32 + j)]);
    m += std::fabs(d * xq.d[static_cast<std::size_t>(token * blocks + b)]) * s;
  }
  return m;
}

}  // namespace peregrine::test
