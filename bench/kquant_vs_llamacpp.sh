#!/usr/bin/env bash
# Peregrine vs llama.cpp on the GGUF weight types people download (issue #16's targets), both
# engines timed in this run on the same files, alternating, with the roofline beside them.
#
# Usage: bench/kquant_vs_llamacpp.sh LLAMA_BENCH [MODEL_DIR] [THREADS] [REPS] [TYPES]
#   LLAMA_BENCH  path of a llama-bench binary (llama.cpp built by hand, outside this repository)
#   MODEL_DIR    (default /work/models-synth) holds tinyllama-f16.gguf (`peregrine synth --shape
#                tinyllama-1.1b --dtype f16`) and receives tinyllama-<TYPE>.gguf, written by
#                `peregrine quantize --method rtn --gguf-type TYPE` when missing
#   TYPES        (default "Q4_K_M Q5_K_M Q6_K Q3_K_M IQ4_XS")
# Per type: llama-bench pp128 / tg128 (-r REPS), then `peregrine bench -p 128 -n 128 -r REPS`, then
# llama-bench again; the llama.cpp figure is the mean of its two runs. GB/s = weight bytes read
# per decoded token × tokens/s, as a share of `peregrine bench --roofline` measured in the run.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$root/build/bin/peregrine"
llama_bench="${1:?usage: $0 LLAMA_BENCH [MODEL_DIR] [THREADS] [REPS] [TYPES]}"
dir="${2:-/work/models-synth}"
threads="${3:-2}"
reps="${4:-3}"
types="${5:-Q4_K_M Q5_K_M Q6_K Q3_K_M IQ4_XS}"

src="$dir/tinyllama-f16.gguf"
[ -f "$src" ] || "$bin" synth --shape tinyllama-1.1b --dtype f16 -o "$src" >&2

# llama-bench's mean tokens/s for one test ("pp128" / "tg128") from its JSON.
llama() {
  "$llama_bench" -m "$1" -p 128 -n 128 -t "$threads" -r "$reps" -o json 2>/dev/null |
    /usr/bin/python3 -c 'import json,sys; print(" ".join("%.3f" % x["avg_ts"] for x in json.load(sys.stdin)))'
}

printf '| type | Peregrine tg128 | llama.cpp tg128 | ratio | Peregrine pp128 | llama.cpp pp128 | ratio | tg GB/s (%% of read bw) |\n'
printf '|---|---|---|---|---|---|---|---|\n'
for type in $types; do
  model="$dir/tinyllama-$type.gguf"
  [ -f "$model" ] || "$bin" quantize -m "$src" -o "$model" --method rtn --gguf-type "$type" >&2
  read -r l_pp1 l_tg1 <<<"$(llama "$model")"
  json="$("$bin" bench -m "$model" -p 128 -n 128 -t "$threads" -r "$reps" --json)"
  read -r l_pp2 l_tg2 <<<"$(llama "$model")"
  /usr/bin/python3 - "$type" "$l_pp1" "$l_tg1" "$l_pp2" "$l_tg2" "$json" <<'PY'
import json, sys
t, pp1, tg1, pp2, tg2, js = sys.argv[1], *map(float, sys.argv[2:6]), sys.argv[6]
j = json.loads(js)
lpp, ltg = (pp1 + pp2) / 2, (tg1 + tg2) / 2
print(f"| {t} | {j['tg_tps']:.2f} ± {j['tg_sd']:.2f} | {ltg:.2f} ({tg1:.2f}, {tg2:.2f}) | {j['tg_tps']/ltg:.2f}x "
      f"| {j['pp_tps']:.1f} ± {j['pp_sd']:.1f} | {lpp:.1f} ({pp1:.1f}, {pp2:.1f}) | {j['pp_tps']/lpp:.2f}x "
      f"| {j['gbps']:.1f} ({100*j['gbps']/j['read_gbps']:.0f}% of {j['read_gbps']:.1f}) |")
PY
done
