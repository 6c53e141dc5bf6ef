#!/usr/bin/env bash
# Packs what the GPU checks need into one folder, for a GPU machine that has the NVIDIA driver
# and CUDA 13 runtime libraries but not Peregrine's build dependencies (the device tool's
# machines): the CUDA build's `peregrine` and `backend_tests`, the shared libraries they load
# that are neither glibc's, libstdc++ nor CUDA's, and the real models / test models the GPU
# tests read. Then run scripts/cuda_check.sh BUNDLE there.
#
# Usage: scripts/cuda_bundle.sh BUILD_DIR BUNDLE_DIR
#   BUILD_DIR  a build configured with PEREGRINE_CUDA=ON (bin/peregrine, bin/backend_tests, testdata/)
#   BUNDLE_DIR created (emptied first)
set -euo pipefail
build=$(realpath "$1")
out=$2
here=$(cd "$(dirname "$0")/.." && pwd)
shared=${PEREGRINE_SHARED_DIR:-$here/../shared}
testdata=${PEREGRINE_TESTDATA_DIR:-$build/testdata}

rm -rf "$out"
mkdir -p "$out"/{bin,lib,testdata} "$out"/shared/models/{stories260K,kquant-test} "$out"/shared/tokenizers/gguf-vocab
cp "$build"/bin/peregrine "$build"/bin/backend_tests "$build"/bin/libperegrine_cuda.so "$out"/bin/
strip "$out"/bin/*
ldd "$out"/bin/* | awk '/=>/ {print $3}' | sort -u | while read -r lib; do
  case $(basename "$lib") in
    libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libgcc_s.so*|libstdc++.so*|libcuda*|libcublas*) ;;
    *) cp -L "$lib" "$out"/lib/ ;;
  esac
done
cp "$shared"/models/stories260K/* "$out"/shared/models/stories260K/
for t in F16 Q8_0 Q4_0 Q4_K_M IQ4_XS; do cp "$shared/models/kquant-test/tiny-llama-256.$t.gguf" "$out"/shared/models/kquant-test/; done
cp "$shared"/tokenizers/gguf-vocab/ggml-vocab-llama-spm.gguf "$out"/shared/tokenizers/gguf-vocab/
mkdir -p "$out"/shared/data/tinystories && cp "$shared"/data/tinystories/tinystories_valid_excerpt.txt "$out"/shared/data/tinystories/  # loadgen's prompts
for f in mistral-swa llama3-rope phi3-longrope qwen2 qwen3 gemma2 mixtral; do cp "$testdata/gguf-f32-$f.gguf" "$out"/testdata/; done
cp "$testdata"/gguf-f16-gqa.gguf "$out"/testdata/
du -sh "$out"
