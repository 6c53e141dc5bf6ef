#!/usr/bin/env bash
# Tests the portable build at every x86-64 kernel level this CPU has: a -DPEREGRINE_NATIVE=OFF
# build carries them all (include/peregrine/kernels/cpu/isa.h). The kernel tests run each test
# body once per level (tests/kernels/simd_targets.h); then the kernel, model and engine tests run
# again with the kernels capped at each level below the CPU's own (PEREGRINE_ISA), so the packing
# at load, the kernel choices and whole forwards are checked at AVX2 on an AVX-512 machine.
#
# Usage: scripts/test_levels.sh [BUILD_DIR]   (default build-portable)
# On a 2-core machine: the build about 30 minutes from clean, the tests about 10 (2026-11-29).
# The main suite (scripts/test.sh) builds natively, so on an AVX-512 machine it runs only the
# AVX-512 kernels: run this before resolving a change to the kernels.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build-portable}"
jobs=$(nproc)

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPEREGRINE_NATIVE=OFF -DPEREGRINE_WERROR=ON \
  -DPEREGRINE_BENCH=OFF -DPEREGRINE_CUDA=OFF -DPEREGRINE_TRAIN=OFF
cmake --build "$build"

echo "== kernel tests, every level in each test"
ctest --test-dir "$build" --output-on-failure -j "$jobs" -L kernels

native="$("$build/bin/peregrine" bench --roofline -t 1 | sed -n 's/.*threads, \([A-Z0-9_+]*\)).*/\1/p')"
echo "== this CPU's best level: $native"
for level in avx2 avx2vnni avx512; do
  # Only levels below the CPU's own (capping refuses a level the CPU lacks; AVX-512 VNNI does not
  # imply AVX-VNNI).
  case "$native:$level" in
    AVX2:*|AVX2+VNNI:*|AVX3:avx512|SSE4:*|SSSE3:*|EMU128:*|SCALAR:*) continue ;;
  esac
  if [ "$level" = avx2vnni ] && ! grep -qw avx_vnni /proc/cpuinfo; then continue; fi
  echo "== kernel, model and engine tests with the kernels capped at $level"
  PEREGRINE_ISA="$level" ctest --test-dir "$build" --output-on-failure -j "$jobs" -L 'kernels|model|engine'
done
