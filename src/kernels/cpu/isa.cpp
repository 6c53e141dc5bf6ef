#include "peregrine/kernels/cpu/isa.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/isa.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

HWY_BEFORE_NAMESPACE();
namespace peregrine::HWY_NAMESPACE {

/// The Highway target this copy of the code was compiled for.
std::int64_t CompiledTarget() { return HWY_TARGET; }

}  // namespace peregrine::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace peregrine {
HWY_EXPORT(CompiledTarget);

namespace {

struct LevelTarget {
  IsaLevel level;
  std::string_view name;
  std::int64_t targets;  // the Highway targets of the level (better targets have lower bits)
};

#if defined(__x86_64__)
constexpr std::array<LevelTarget, 6> kLevels = {{
    {IsaLevel::kScalar, "scalar", HWY_SCALAR | HWY_EMU128},
    {IsaLevel::kSse4, "sse4", HWY_SSE4 | HWY_SSSE3},
    {IsaLevel::kAvx2, "avx2", HWY_AVX2},
    {IsaLevel::kAvx2Vnni, "avx2vnni", 0},  // Highway's AVX2 target, with AVX-VNNI (below)
    {IsaLevel::kAvx512, "avx512", HWY_AVX3},
    {IsaLevel::kAvx512Vnni, "avx512vnni", (HWY_AVX3_DL << 1) - 1},  // and any better x86 target
}};
#else  // aarch64 (other architectures have only the scalar level here)
constexpr std::array<LevelTarget, 2> kLevels = {{
    {IsaLevel::kScalar, "scalar", HWY_SCALAR | HWY_EMU128},
    {IsaLevel::kNeon, "neon", (HWY_NEON << 1) - 1},  // and any better Arm target (SVE, if compiled)
}};
#endif

// AVX-VNNI is no Highway target: kAvx2Vnni is the AVX2 target while `avx2_vnni` is set, which
// starts as the CPU's AVX-VNNI flag and follows every cap (limit_isa).
#if defined(__x86_64__)
bool cpu_has_avx_vnni() {
  static const bool has = [] {
    __builtin_cpu_init();  // static initializers may run before libgcc's
    return __builtin_cpu_supports("avxvnni") != 0;
  }();
  return has;
}
#else
bool cpu_has_avx_vnni() { return false; }
#endif
std::atomic<bool> avx2_vnni{cpu_has_avx_vnni()};

// The level whose Highway targets `level` runs (kAvx2Vnni: kAvx2's).
IsaLevel target_level(IsaLevel level) {
#if defined(__x86_64__)
  if (level == IsaLevel::kAvx2Vnni) return IsaLevel::kAvx2;
#endif
  return level;
}

// `level`, as AVX-VNNI raises it when `vnni` (kAvx2 → kAvx2Vnni).
IsaLevel with_vnni(IsaLevel level, [[maybe_unused]] bool vnni) {
#if defined(__x86_64__)
  if (level == IsaLevel::kAvx2 && vnni) return IsaLevel::kAvx2Vnni;
#endif
  return level;
}

// The Highway targets better than `level`'s (to disable when capping at it).
std::int64_t targets_above(IsaLevel level) {
  std::int64_t above = 0;
  for (const auto& l : kLevels) {
    if (l.level > level) above |= l.targets;
  }
  return above;
}

IsaLevel level_of(std::int64_t best_target) {
  for (const auto& l : kLevels) {
    if ((l.targets & best_target) != 0) return l.level;
  }
  return IsaLevel::kScalar;
}

// The best compiled target among `supported`.
IsaLevel best_level(std::int64_t supported) {
  const std::int64_t usable = supported & HWY_TARGETS;
  return usable == 0 ? IsaLevel::kScalar : level_of(usable & -usable);
}

// The best level of this CPU and build, before any cap (first called at program start, below).
IsaLevel uncapped_level() {
  static const IsaLevel level = with_vnni(best_level(hwy::SupportedTargets()), cpu_has_avx_vnni());
  return level;
}

// PEREGRINE_ISA applies from program start, before any kernel dispatches; a bad value ends the
// program with one line on stderr.
const bool kEnvironmentApplied = [] {
  uncapped_level();
  const Status s = isa_from_environment();
  if (!s) {
    std::fprintf(stderr, "peregrine: error: PEREGRINE_ISA: %s\n", s.message().c_str());
    std::exit(2);
  }
  return true;
}();

}  // namespace

std::string_view isa_level_name(IsaLevel level) {
  for (const auto& l : kLevels) {
    if (l.level == level) return l.name;
  }
  return "unknown";
}

Expected<IsaLevel> parse_isa_level(std::string_view name) {
  if (name == "native") return uncapped_level();
  std::string names;
  for (const auto& l : kLevels) {
    if (l.name == name) return l.level;
    names += (names.empty() ? "" : ", ") + std::string(l.name);
  }
  return invalid_argument("unknown kernel level '" + std::string(name) + "' (expected one of: " + names + ", native)");
}

// The dispatch table's choice (one indexed call; hwy::SupportedTargets() would re-run CPUID).
IsaLevel isa_level() {
  return with_vnni(level_of(HWY_DYNAMIC_DISPATCH(CompiledTarget)()), avx2_vnni.load(std::memory_order_relaxed));
}

const char* isa_target_name() {
#if defined(__x86_64__)
  if (isa_level() == IsaLevel::kAvx2Vnni) return "AVX2+VNNI";
#endif
  return hwy::TargetName(HWY_DYNAMIC_DISPATCH(CompiledTarget)());
}

Status limit_isa(IsaLevel level) {
  const IsaLevel best = uncapped_level();
  if (best < level) {
    return unsupported("this CPU (or build) runs kernels up to " + std::string(isa_level_name(best)) + ", not " +
                       std::string(isa_level_name(level)));
  }
  if (target_level(level) != level && !cpu_has_avx_vnni()) {
    return unsupported("this CPU has no AVX-VNNI (the VEX-encoded vpdpbusd: Intel Alder Lake and later client "
                       "cores, AMD Zen 5; AVX-512 VNNI does not imply it)");
  }
  const std::int64_t kept = HWY_TARGETS & ~targets_above(level);
  if (kept == 0 || best_level(kept) != target_level(level)) {
#if defined(__x86_64__)
    const std::string why = "a -march=native build); rebuild with -DPEREGRINE_NATIVE=OFF";
#else
    const std::string why = "Highway compiles no scalar copy where NEON is the baseline, as on every aarch64)";
#endif
    return unsupported("this build has no " + std::string(isa_level_name(level)) + " kernels (its baseline is above it: " + why);
  }
  hwy::DisableTargets(targets_above(level));  // replaces any earlier cap
#if defined(__x86_64__)
  avx2_vnni.store(cpu_has_avx_vnni() && level >= IsaLevel::kAvx2Vnni);
#endif
  return Status::ok();
}

Status isa_from_environment() {
  const char* value = std::getenv("PEREGRINE_ISA");
  if (value == nullptr || *value == '\0') return Status::ok();
  auto level = parse_isa_level(value);
  if (!level) return level.status();
  return limit_isa(*level);
}

}  // namespace peregrine
#endif  // HWY_ONCE
