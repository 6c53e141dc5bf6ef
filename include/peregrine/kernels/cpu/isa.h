// The kernel level the CPU kernels run at (x86-64: SSE4 to AVX-512 VNNI; aarch64: NEON), and how
// to cap it.
//
// Every SIMD kernel file is compiled once per Highway target (kernels/cpu/*.cpp with
// foreach_target.h) and picks the best one the CPU supports at run time. A build with
// -DPEREGRINE_NATIVE=OFF carries every level from SSE4 to AVX-512 VNNI (one portable binary);
// a native build carries only the levels at or above its -march=native baseline (on aarch64,
// where NEON is the baseline, every build carries NEON alone). Capping the
// level (`bench --isa`, or PEREGRINE_ISA=avx2 in the environment of any Peregrine program or test)
// makes a wide machine run a narrower CPU's kernels, so both paths can be timed on the same
// memory in the same run.
#pragma once

#include <string_view>

#include "peregrine/core/status.h"

namespace peregrine {

/// Kernel levels, narrowest first; each architecture has its own (the x86 kernels' checks such as
/// `isa_level() >= IsaLevel::kAvx512` compile on x86-64 only). kScalar is Highway's portable
/// scalar code everywhere.
#if defined(__x86_64__)
/// kAvx512Vnni is Highway's AVX3_DL (Ice Lake, Zen 4 and later: AVX-512 with VNNI, VBMI, VBMI2);
/// kAvx512 is AVX3 (Skylake-X: F, BW, DQ, VL); kAvx2Vnni is Highway's AVX2 target on a CPU with
/// AVX-VNNI (the VEX-encoded vpdpbusd / vpdpwssd: Intel Alder Lake and later client cores, AMD
/// Zen 5), whose integer GEMMs fold vpmaddwd + vpaddd into one instruction; kAvx2 is Haswell and
/// Zen 1-3 (AVX2, FMA, F16C, BMI2); kSse4 is SSE4.2 + SSSE3.
enum class IsaLevel { kScalar, kSse4, kAvx2, kAvx2Vnni, kAvx512, kAvx512Vnni };
#else
/// kNeon is Highway's NEON target (aarch64's Advanced SIMD, with AES), the baseline there, so
/// an aarch64 build has no kScalar copy; Highway's SVE targets are not compiled (CMakeLists.txt).
enum class IsaLevel { kScalar, kNeon };
#endif

/// "scalar", "sse4", "avx2", "avx2vnni", "avx512", "avx512vnni" (x86-64); "scalar", "neon" (others).
std::string_view isa_level_name(IsaLevel level);

/// Parses a level name (as isa_level_name writes it; "native" = the best this CPU and build
/// have). Errors: kInvalidArgument naming the accepted values.
Expected<IsaLevel> parse_isa_level(std::string_view name);

/// The level the kernels dispatch to now: the best Highway target that is compiled in, supported
/// by this CPU and not above a cap.
IsaLevel isa_level();

/// The Highway target the kernels dispatch to now ("AVX2", "AVX3_DL", ...; "AVX2+VNNI" at
/// kAvx2Vnni), for reports.
const char* isa_target_name();

/// Caps the kernels at `level` for the rest of the process (every later dispatch, and every
/// check of `isa_level()`: which weights get packed at load, which kernels a product takes).
/// Call it before loading a model. Errors: kUnsupported when the CPU lacks the level, or when
/// this build's lowest compiled level is above it (a -march=native build; rebuild with
/// -DPEREGRINE_NATIVE=OFF; on aarch64 the scalar level); kAvx2Vnni also when the CPU lacks
/// AVX-VNNI, which AVX-512 VNNI does not imply (Zen 4, Ice Lake have only the EVEX form).
Status limit_isa(IsaLevel level);

/// Applies PEREGRINE_ISA from the environment if set (done once at program start; the return
/// value says whether that worked, for the CLI to report).
Status isa_from_environment();

}  // namespace peregrine
