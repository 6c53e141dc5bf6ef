// Shared checks for the fuzz targets: a violated invariant aborts, so libFuzzer records it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "peregrine/core/status.h"
#include "peregrine/core/tensor.h"

namespace peregrine::fuzz {

[[noreturn]] inline void fail(const char* what) {
  std::fprintf(stderr, "fuzz invariant violated: %s\n", what);
  std::abort();
}

/// An error must carry a code and a one-line message.
inline void check_error(const Status& st) {
  if (st.is_ok()) fail("error result with ErrorCode::kOk");
  if (st.message().empty()) fail("error without a message");
  if (st.message().find('\n') != std::string::npos) fail("multi-line error message");
}

/// The view lies inside [base, base + size), its byte count matches its shape, and every byte
/// is readable (ASan reports any byte outside the input buffer). Returns a byte sum.
inline std::uint64_t touch(const TensorView& t, const std::uint8_t* base, std::size_t size) {
  const auto* p = static_cast<const std::uint8_t*>(t.data);
  if (t.nbytes > 0 && (p < base || t.nbytes > size || p - base > static_cast<std::ptrdiff_t>(size - t.nbytes))) {
    fail("tensor view outside the input");
  }
  for (auto d : t.shape) {
    if (d < 0) fail("negative dim");
  }
  const std::int64_t rows = t.n_rows();
  const std::int64_t len = t.row_length();
  if (rows < 0 || len < 0) fail("negative rows / row length");
  (void)t.shape_string();
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < t.nbytes; ++i) sum += p[i];
  return sum;
}

}  // namespace peregrine::fuzz
