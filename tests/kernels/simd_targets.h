// Runs a test body once per Highway SIMD target that the kernels were compiled for and this CPU
// supports: with -DPEREGRINE_NATIVE=OFF that is every x86 target from SCALAR/SSSE3 to AVX3_DL
// (on aarch64 NEON alone, its baseline), so the narrower targets' code paths (register blocking,
// tails) are tested on a wide machine. On a CPU with AVX-VNNI the AVX2 target runs twice, with
// its AVX-VNNI kernels (IsaLevel::kAvx2Vnni) and without (kAvx2).
#pragma once

#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL  // as peregrine_lib (CMakeLists.txt) compiles it
#endif
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cstdint>

#include "peregrine/kernels/cpu/isa.h"

namespace peregrine::test {

template <class Fn>
void for_each_simd_target(const Fn& fn) {
  for (std::int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    fn();
#if defined(__x86_64__)
    if (isa_level() == IsaLevel::kAvx2Vnni) {  // again without AVX-VNNI; then back to the cap before
      ASSERT_TRUE(limit_isa(IsaLevel::kAvx2));
      SCOPED_TRACE("AVX2 without AVX-VNNI");
      fn();
      ASSERT_TRUE(limit_isa(*parse_isa_level("native")));
      ASSERT_TRUE(isa_from_environment());
    }
#endif
  }
  hwy::SetSupportedTargetsForTest(0);
}

}  // namespace peregrine::test
