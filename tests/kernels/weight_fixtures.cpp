#include "weight_fixtures.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "peregrine/quant/fp16.h"
#include "peregrine/quant/fp8.h"

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

double f32_gamma(double k) {
  const double u = std::ldexp(1.0, -24);
  return k * u / (1.0 - k * u);
}

}  // namespace peregrine::test
