#!/usr/bin/env bash
# Cross-builds Peregrine for aarch64 (arm64) and runs its tests under qemu-aarch64 (user mode).
# Usage: scripts/test_arm64.sh [layer ...]     (default: kernels model tokenizer)
#
# Debian's cross compiler (g++-aarch64-linux-gnu) and qemu-user are installed with apt; the arm64
# libraries come from Debian's arm64 packages extracted into build-arm64/sysroot with dpkg -x
# (apt-get download, after `dpkg --add-architecture arm64`): installing them with apt would have
# to upgrade the amd64 ones to the same versions (multiarch). No libtorch (training), MPI or CUDA,
# and no -march=native: the kernels run Highway's NEON target (aarch64's baseline: no scalar copy
# is compiled); its SVE targets are left out (CMakeLists.txt), and the kernels written in x86
# intrinsics take their portable paths.
#
# Real-model tests (the tokenizers against llama.cpp's ids) run where models/cache holds the models
# (scripts/fetch_models.sh, or PEREGRINE_MODEL_CACHE) and skip otherwise. PEREGRINE_GTEST_FILTER
# narrows every layer's run; PEREGRINE_JOBS sets the build's parallelism (default: nproc).
#
# Time on the 2-core x86-64 machine (EPYC, shared with other builds, 2026-11-29): the first cross
# build of the library and the three test binaries about 40 min (nice -n 19), the sysroot and the
# test models seconds. Under qemu-aarch64 (Debian 12's 7.2), 2026-11-30 (Zen 5): kernels_tests
# 178 s (108 passed, 7 skipped: the AVX-512-only kernels), model_tests 32 s (62), tokenizer_tests
# 22 s (86, with the real models). Not in .ci/run for the build's time: run it by hand before
# resolving a change to the kernels.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
build="$root/build-arm64"
sysroot="$build/sysroot"
layers=("$@")
[ ${#layers[@]} -gt 0 ] || layers=(kernels model tokenizer)

# The host tools: the cross compiler, qemu-user, and apt's arm64 package lists.
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
missing=()
for p in g++-aarch64-linux-gnu qemu-user; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  $SUDO dpkg --add-architecture arm64
  $SUDO apt-get update -qq
fi
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The sysroot: arm64 libraries (and their -dev files) and the header-only libraries (all).
sysroot_packages=(
  libhwy1:arm64 libhwy-dev:arm64 libpcre2-8-0:arm64 libpcre2-dev:arm64
  libsentencepiece0:arm64 libsentencepiece-dev:arm64
  libcpp-httplib0.11:arm64 libcpp-httplib-dev:arm64 libssl3:arm64 libssl-dev:arm64
  zlib1g:arm64 zlib1g-dev:arm64 libbrotli1:arm64 libbrotli-dev:arm64
  libgtest-dev:arm64 libgmock-dev:arm64
  nlohmann-json3-dev libcli11-dev libeigen3-dev
)
stamp="$sysroot/.packages"
if [ "$(cat "$stamp" 2>/dev/null)" != "${sysroot_packages[*]}" ]; then
  echo "== arm64 sysroot ($sysroot)"
  rm -rf "$sysroot" "$build/debs"
  mkdir -p "$sysroot" "$build/debs"
  (cd "$build/debs" && apt-get download -q "${sysroot_packages[@]}" 2>&1 | grep -v '^W: Download is performed unsandboxed' || true)
  for deb in "$build"/debs/*.deb; do dpkg -x "$deb" "$sysroot"; done
  # Absolute symlinks (libz.so -> /lib/...) point into the sysroot instead.
  find "$sysroot" -type l -lname '/*' | while read -r link; do
    ln -sfn "$sysroot$(readlink "$link")" "$link"
  done
  rm -rf "$build/debs"
  echo "${sysroot_packages[*]}" > "$stamp"
fi

echo "== aarch64 cross build (${layers[*]/%/_tests})"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_TOOLCHAIN_FILE="$root/cmake/aarch64-linux-gnu.cmake" -DPEREGRINE_ARM64_SYSROOT="$sysroot" \
  -DPEREGRINE_NATIVE=OFF -DPEREGRINE_WERROR=ON -DPEREGRINE_CUDA=OFF -DPEREGRINE_TRAIN=OFF \
  -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON -DPEREGRINE_BENCH=OFF
nice -n 19 cmake --build "$build" --target "${layers[@]/%/_tests}" -j "${PEREGRINE_JOBS:-$(nproc)}"

# The random-weight test models and their reference logits (tools/make_test_models.py, the host's
# python3, as the test fixture make_test_models does): architecture-independent files.
echo "== test models ($build/testdata)"
PEREGRINE_SHARED_DIR="${PEREGRINE_SHARED_DIR:-$root/../shared}" \
  /usr/bin/python3 tools/make_test_models.py --out "$build/testdata" > /dev/null

# Each layer's gtest binary under qemu-aarch64 (one process per layer: ctest's one per test would
# start qemu a thousand times). The binaries start /usr/bin/python3 (the host's, run natively by
# qemu's execve) where they compare with the Python oracles, as on x86.
libs="$sysroot/usr/lib/aarch64-linux-gnu:$sysroot/lib/aarch64-linux-gnu"
failed=()
for layer in "${layers[@]}"; do
  echo "== ${layer}_tests under qemu-aarch64"
  start=$SECONDS
  if ! qemu-aarch64 -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH="$libs" "$build/bin/${layer}_tests" \
       --gtest_brief=1 ${PEREGRINE_GTEST_FILTER:+--gtest_filter="$PEREGRINE_GTEST_FILTER"}; then
    failed+=("$layer")
  fi
  echo "${layer}_tests: $((SECONDS - start)) s"
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "test_arm64: failed: ${failed[*]}" >&2
  exit 1
fi
echo "test_arm64: all passed (${layers[*]})"
