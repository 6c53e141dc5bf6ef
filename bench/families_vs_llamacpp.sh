#!/usr/bin/env bash
# The model families (issue #17's targets) in Peregrine and llama.cpp, same Q4_0 files, same run:
# every family's synth shape beside a Llama of the same size (`synth --arch llama`: the same
# matrices without the family's extras), and each Mixture-of-Experts shape beside its dense
# twin with the same active parameters per token.
#
# Usage: bench/families_vs_llamacpp.sh LLAMA_BENCH [MODEL_DIR] [THREADS] [REPS] [ROUNDS] [SHAPES]
#   LLAMA_BENCH  path of a llama-bench binary (llama.cpp built by hand, outside this repository)
#   MODEL_DIR    (default /work/models-synth) receives <shape>-Q4_0.gguf (and for a dense
#                family <shape>-as-llama-Q4_0.gguf), written by `peregrine synth` when missing
#   SHAPES       (default "qwen2.5-0.5b qwen3-0.6b phi3-mini olmoe-1b-7b olmoe-1b-7b-dense")
# Timing: bench/vs_llamacpp.sh (see there).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$root/build/bin/peregrine"
llama_bench="${1:?usage: $0 LLAMA_BENCH [MODEL_DIR] [THREADS] [REPS] [ROUNDS] [SHAPES]}"
dir="${2:-/work/models-synth}"
threads="${3:-2}"
reps="${4:-3}"
rounds="${5:-3}"
shapes="${6:-qwen2.5-0.5b qwen3-0.6b phi3-mini olmoe-1b-7b olmoe-1b-7b-dense}"

synth() {  # synth OUT SHAPE [--arch A]
  local out="$1"
  shift
  [ -f "$out" ] || "$bin" synth --dtype q4_0 -o "$out" --shape "$@" >&2
}
models=()
for shape in $shapes; do
  synth "$dir/$shape-Q4_0.gguf" "$shape"
  models+=("$dir/$shape-Q4_0.gguf")
  case "$shape" in
    qwen2.5-*|qwen3-*|phi3-*|gemma2-*)
      synth "$dir/$shape-as-llama-Q4_0.gguf" "$shape" --arch llama
      models+=("$dir/$shape-as-llama-Q4_0.gguf") ;;
  esac
done
exec "$root/bench/vs_llamacpp.sh" "$llama_bench" "$threads" "$reps" "$rounds" "${models[@]}"
