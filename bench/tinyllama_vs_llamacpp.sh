#!/usr/bin/env bash
# Peregrine vs llama.cpp on the tinyllama-1.1b shape with random weights (issue #3's targets).
#
# Usage: bench/tinyllama_vs_llamacpp.sh [MODEL_DIR] [THREADS] [REPS]
#   MODEL_DIR (default /work/models-synth) holds or receives tinyllama-1.1b-<dtype>.gguf, written by
#   `peregrine synth` when missing (about 0.6 to 2.2 GB each).
# llama.cpp's figures were measured on this machine kind by the issue's author (commit c392e50,
# -march=native, 2 threads, llama-bench tg128 / pp128); this script measures Peregrine's now,
# with the roofline of the moment beside them (the machine is shared: compare ratios).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$root/build/bin/peregrine"
dir="${1:-/work/models-synth}"
threads="${2:-2}"
reps="${3:-5}"
mkdir -p "$dir"

declare -A llama_tg=([q4_0]=34.3 [q8_0]=21.2 [f16]=14.0)
declare -A llama_pp=([q4_0]=76.8 [q8_0]=64.8 [f16]=82.5)

printf '| dtype | tg t/s | vs llama.cpp | pp128 t/s | vs llama.cpp | tg GB/s (%% bw) | pp GFLOP/s (%% fma) |\n'
printf '|---|---|---|---|---|---|---|\n'
for dtype in q4_0 q8_0 f16; do
  model="$dir/tinyllama-1.1b-$dtype.gguf"
  [ -f "$model" ] || "$bin" synth --shape tinyllama-1.1b --dtype "$dtype" -o "$model" >&2
  json="$("$bin" bench -m "$model" -p 128 -n 128 -t "$threads" -r "$reps" --json)"
  /usr/bin/python3 - "$dtype" "${llama_tg[$dtype]}" "${llama_pp[$dtype]}" <<PY
import json, sys
j = json.loads('''$json''')
dtype, ltg, lpp = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
print(f"| {dtype} | {j['tg_tps']:.2f} ± {j['tg_sd']:.2f} | {j['tg_tps']/ltg:.2f}x | {j['pp_tps']:.2f} ± {j['pp_sd']:.2f} "
      f"| {j['pp_tps']/lpp:.2f}x | {j['gbps']:.1f} ({100*j['gbps']/j['read_gbps']:.0f}%) "
      f"| {j['gflops']:.1f} ({100*j['gflops']/j['fma_gflops']:.0f}%) |")
PY
done
