#!/usr/bin/env bash
# Peregrine vs llama.cpp on the same GGUF files, both engines timed in this run, alternating,
# with the roofline beside them (the common driver of kquant_vs_llamacpp.sh and
# families_vs_llamacpp.sh).
#
# Usage: bench/vs_llamacpp.sh LLAMA_BENCH THREADS REPS ROUNDS MODEL.gguf...
#   LLAMA_BENCH  path of a llama-bench binary (llama.cpp built by hand, outside this repository)
#   ROUNDS       decode alternations per model
# Per model, prefill: llama-bench pp128 (-r REPS), `peregrine bench -p 128 -n 0 -r REPS`,
# llama-bench again; the llama.cpp figure is the mean of its two runs. Decode: llama-bench tg128,
# then ROUNDS × (peregrine tg128, llama-bench tg128), one repetition each, so every Peregrine
# run sits between two llama.cpp runs; its ratio is against the mean of those two, and the table
# gives the median ratio of the rounds with their range (the read bandwidth of a shared machine
# drifts over minutes; neighbours in time share it). GB/s = weight bytes Peregrine's decode
# steps read (measured) × tokens/s (median run), as a share of the read roofline measured in the
# same process (the best of its samples), of the median of those samples and of the fastest
# read method's median (what that method sustains, bursts left out); pp GB = the
# weight bytes one pp128 forward read (a Mixture-of-Experts model reads each chosen expert once
# per layer). The kernels column is the Highway target Peregrine's kernels ran at.
#
# Environment: PEREGRINE_BIN (default build/bin/peregrine); PEREGRINE_ISA=avx2 caps Peregrine's
# kernels at AVX2 (needs a portable build, -DPEREGRINE_NATIVE=OFF). To compare AVX2 paths on an
# AVX-512 machine, give it a llama-bench built with AVX2 only: cmake -DGGML_NATIVE=OFF
# -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF (its CPU backend
# then has no AVX-512 code).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${PEREGRINE_BIN:-$root/build/bin/peregrine}"
usage="usage: $0 LLAMA_BENCH THREADS REPS ROUNDS MODEL.gguf..."
llama_bench="${1:?$usage}"
threads="${2:?$usage}"
reps="${3:?$usage}"
rounds="${4:?$usage}"
shift 4
[ "$#" -gt 0 ] || { echo "$usage" >&2; exit 2; }

# llama-bench's mean tokens/s of its one test: llama MODEL -p P -n N -r R; "nan" (and the reason
# on stderr) where llama-bench fails, so one crashing test leaves the other figures standing.
llama() {
  local model="$1" out rc=0
  shift
  out="$("$llama_bench" -m "$model" -t "$threads" "$@" -o json 2>/dev/null)" || rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "llama-bench $* on $(basename "$model") failed (exit status $rc)" >&2
    echo nan
    return
  fi
  /usr/bin/python3 -c 'import json,sys; print(" ".join("%.3f" % x["avg_ts"] for x in json.load(sys.stdin)))' <<<"$out"
}

printf '| model | kernels | Peregrine tg128 | llama.cpp tg128 | tg ratio, median (range) | Peregrine pp128 | llama.cpp pp128 | pp ratio | tg GB/s (%% of read roofline; of its median sample; of the fastest method, its median) | pp128 GB read |\n'
printf '|---|---|---|---|---|---|---|---|---|---|\n'
for model in "$@"; do
  l_pp1="$(llama "$model" -p 128 -n 0 -r "$reps")"
  pp_json="$("$bin" bench -m "$model" -p 128 -n 0 -t "$threads" -r "$reps" --json)"
  l_pp2="$(llama "$model" -p 128 -n 0 -r "$reps")"
  l_tg="$(llama "$model" -p 0 -n 128 -r 1)"
  tg_runs=()
  for ((i = 0; i < rounds; ++i)); do
    tg_runs+=("$("$bin" bench -m "$model" -p 0 -n 128 -t "$threads" -r 1 --json | tr -d '\n')")
    l_tg="$l_tg $(llama "$model" -p 0 -n 128 -r 1)"
  done
  /usr/bin/python3 - "$(basename "$model" .gguf)" "$l_pp1" "$l_pp2" "$pp_json" "$l_tg" "${tg_runs[@]}" <<'PY'
import json, statistics, sys
name, lpp1, lpp2, pp_js, l_tg = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5]
pp = json.loads(pp_js)
runs = [json.loads(j) for j in sys.argv[6:]]
llama_tg = [float(x) for x in l_tg.split()]
ours = [r["tg_tps"] for r in runs]
ratios = [o / ((llama_tg[i] + llama_tg[i + 1]) / 2) for i, o in enumerate(ours)]
mid = sorted(range(len(runs)), key=lambda i: ours[i])[len(runs) // 2]
lpp = (lpp1 + lpp2) / 2
# NaN where llama-bench's prefill failed (its stderr line says how)
llama_pp = (f"{lpp:.1f} ({lpp1:.1f}, {lpp2:.1f}) | {pp['pp_tps'] / lpp:.2f}×" if lpp == lpp
            else "failed | –")
print(f"| {name} | {runs[mid]['simd']} | {statistics.median(ours):.2f} ({min(ours):.2f}–{max(ours):.2f}) "
      f"| {statistics.median(llama_tg):.2f} ({min(llama_tg):.2f}–{max(llama_tg):.2f}) "
      f"| {statistics.median(ratios):.2f}× ({min(ratios):.2f}–{max(ratios):.2f}) "
      f"| {pp['pp_tps']:.1f} ± {pp['pp_sd']:.1f} | {llama_pp} "
      f"| {runs[mid]['gbps']:.1f} ({100 * runs[mid]['gbps'] / runs[mid]['read_gbps']:.0f}% of {runs[mid]['read_gbps']:.1f}; "
      f"{100 * runs[mid]['gbps'] / runs[mid]['read_median_gbps']:.0f}% of its median {runs[mid]['read_median_gbps']:.1f}; "
      f"{100 * runs[mid]['gbps'] / runs[mid]['read_sustained_gbps']:.0f}% of {runs[mid]['read_sustained_gbps']:.1f}) "
      f"| {pp['pp_weight_bytes'] / 1e9:.3f} |")
PY
done
