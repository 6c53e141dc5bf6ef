#include "simd_targets.h"

// The same target list as peregrine_lib (CMakeLists.txt defines HWY_WANT_AVX3_DL for it).
#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL
#endif
#include <hwy/targets.h>

namespace peregrine::test {

void for_each_simd_target(const std::function<void(const char* target)>& fn) {
  for (std::int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    fn(hwy::TargetName(target));
  }
  hwy::SetSupportedTargetsForTest(0);
}

}  // namespace peregrine::test
