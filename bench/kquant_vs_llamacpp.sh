#!/usr/bin/env bash
# Peregrine vs llama.cpp on the GGUF weight types people download (issue #16's targets), both
# engines timed in this run on the same files, alternating, with the roofline beside them.
#
# Usage: bench/kquant_vs_llamacpp.sh LLAMA_BENCH [MODEL_DIR] [THREADS] [REPS] [TYPES] [ROUNDS]
#   LLAMA_BENCH  path of a llama-bench binary (llama.cpp built by hand, outside this repository)
#   MODEL_DIR    (default /work/models-synth) holds tinyllama-f16.gguf (`peregrine synth --shape
#                tinyllama-1.1b --dtype f16`) and receives tinyllama-<TYPE>.gguf, written by
#                `peregrine quantize --method rtn --gguf-type TYPE` when missing
#   TYPES        (default "Q4_K_M Q5_K_M Q6_K Q3_K_M IQ4_XS")
#   ROUNDS       (default 5) decode alternations
# Each type's file is timed by bench/vs_llamacpp.sh (prefill pp128 and alternating decode tg128
# rounds; see there).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$root/build/bin/peregrine"
llama_bench="${1:?usage: $0 LLAMA_BENCH [MODEL_DIR] [THREADS] [REPS] [TYPES] [ROUNDS]}"
dir="${2:-/work/models-synth}"
threads="${3:-2}"
reps="${4:-3}"
types="${5:-Q4_K_M Q5_K_M Q6_K Q3_K_M IQ4_XS}"
rounds="${6:-5}"

src="$dir/tinyllama-f16.gguf"
[ -f "$src" ] || "$bin" synth --shape tinyllama-1.1b --dtype f16 -o "$src" >&2
models=()
for type in $types; do
  model="$dir/tinyllama-$type.gguf"
  [ -f "$model" ] || "$bin" quantize -m "$src" -o "$model" --method rtn --gguf-type "$type" >&2
  models+=("$model")
done
exec "$root/bench/vs_llamacpp.sh" "$llama_bench" "$threads" "$reps" "$rounds" "${models[@]}"
