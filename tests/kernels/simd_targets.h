// Runs a test body once per SIMD target of the library's Highway dispatch.
#pragma once

#include <functional>

namespace peregrine::test {

/// Calls fn(target name) once for every Highway target compiled into peregrine_lib that this
/// CPU supports, with dynamic dispatch pinned to that target, so portable fallbacks (e.g. the
/// AVX2 path on an AVX-512 machine) are tested too; restores normal dispatch afterwards.
void for_each_simd_target(const std::function<void(const char* target)>& fn);

}  // namespace peregrine::test
