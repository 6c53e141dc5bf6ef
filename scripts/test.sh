#!/usr/bin/env bash
# Runs the whole test suite: the Release build's tests, then the unit tests again under
# AddressSanitizer + UndefinedBehaviorSanitizer. Usage: scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
jobs=$(nproc)

echo "== Release build + tests"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DPEREGRINE_WERROR=ON
cmake --build build
ctest --test-dir build --output-on-failure -j "$jobs"

echo "== ASan + UBSan build + tests"
# Without the CUDA backend library (its kernels are not host code the sanitizers see; the
# Release pass built it and ran its tests, which skip without a GPU) and without the training
# layer (libtorch is not built with the sanitizers; the Release pass ran its tests).
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPEREGRINE_SANITIZE=ON -DPEREGRINE_WERROR=ON \
  -DPEREGRINE_BENCH=OFF -DPEREGRINE_CUDA=OFF -DPEREGRINE_TRAIN=OFF
cmake --build build-asan
# RealModels/QuantizeModelTest (issue #6's quality comparisons: 3-4 full quantizations and
# 15.5k-token KLD evaluations each, ~4 min under the sanitizers) ran in the Release pass above;
# their code paths run here through QuantizeEveryMethod and the quant/cli unit tests.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j "$jobs" -E '^RealModels/QuantizeModelTest\.'
