#!/usr/bin/env bash
# Configures and builds Peregrine (Release, warnings as errors) into build/.
# Usage: scripts/build.sh [--target NAME ...] [extra cmake args]
#   scripts/build.sh                    everything (the tests, benchmarks, CUDA and training libraries)
#   scripts/build.sh --target peregrine only the CLI and the libraries it always loads (the quickstart)
# The quickstart and the test command configure build/ identically, so the test command's build
# compiles only what the quickstart did not. Another compiler than Debian 12's GCC may warn
# where it does not: add -DPEREGRINE_WERROR=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."
targets=()
configure=()
while [ $# -gt 0 ]; do
  if [ "$1" = --target ] && [ $# -ge 2 ]; then
    targets+=(--target "$2")
    shift 2
  else
    configure+=("$1")
    shift
  fi
done
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DPEREGRINE_WERROR=ON ${configure[@]+"${configure[@]}"}
cmake --build build ${targets[@]+"${targets[@]}"}
