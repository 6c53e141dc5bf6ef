// Runs a test body once per Highway SIMD target that the kernels were compiled for and this CPU
// supports: with -DPEREGRINE_NATIVE=OFF that is every x86 target from SCALAR/SSSE3 to AVX3_DL
// (on aarch64 NEON alone, its baseline), so the narrower targets' code paths (register blocking,
// tails) are tested on a wide machine.
#pragma once

#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL  // as peregrine_lib (CMakeLists.txt) compiles it
#endif
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cstdint>

namespace peregrine::test {

template <class Fn>
void for_each_simd_target(const Fn& fn) {
  for (std::int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    fn();
  }
  hwy::SetSupportedTargetsForTest(0);
}

}  // namespace peregrine::test
