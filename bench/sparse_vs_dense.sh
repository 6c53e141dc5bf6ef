#!/usr/bin/env bash
# N:M sparse models against their dense twins, both timed in this run, alternating (the read
# bandwidth of a shared machine drifts over minutes; neighbours in time share it).
#
# Usage: bench/sparse_vs_dense.sh THREADS ROUNDS DENSE.gguf SPARSE.gguf [DENSE.gguf SPARSE.gguf ...]
#   e.g. the tinyllama-1.1b synth shape in F16, `peregrine prune --method magnitude --pattern 2:4`
#   of it (with `--quantize q4` for the 4-bit one), and `peregrine quantize --bits 4 --group 32`
#   of it (the dense Q4_0 twin: the same tool keeps the same F16 embedding and LM head).
# Per pair and round: `peregrine bench -p 64 -n 32 -r 3` on the dense model, then on the sparse
# one. Prints every round's decode (tg32) and prefill (pp64) tokens/s of both and the sparse /
# dense ratio, then per pair the median ratio of the rounds with their range.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$root/build/bin/peregrine"
usage="usage: $0 THREADS ROUNDS DENSE.gguf SPARSE.gguf [DENSE.gguf SPARSE.gguf ...]"
threads="${1:?$usage}"
rounds="${2:?$usage}"
shift 2
[ "$#" -gt 0 ] && [ $(($# % 2)) -eq 0 ] || { echo "$usage" >&2; exit 2; }

# "tg pp" tokens/s of one model: peregrine bench's mean tg32 and pp64 rates.
rates() {
  "$bin" bench -m "$1" -p 64 -n 32 -r 3 -t "$threads" --json |
    /usr/bin/python3 -c 'import json,sys; r=json.load(sys.stdin); print("%.2f %.2f" % (r["tg_tps"], r["pp_tps"]))'
}

summary=()
printf '| round | dense | sparse | dense tg32 | sparse tg32 | tg ratio | dense pp64 | sparse pp64 | pp ratio |\n'
printf '|---|---|---|---|---|---|---|---|---|\n'
while [ "$#" -gt 0 ]; do
  dense="$1" sparse="$2"
  shift 2
  tg_ratios=() pp_ratios=()
  for round in $(seq 1 "$rounds"); do
    read -r d_tg d_pp <<<"$(rates "$dense")"
    read -r s_tg s_pp <<<"$(rates "$sparse")"
    tg_ratio="$(/usr/bin/python3 -c "print('%.2f' % ($s_tg / $d_tg))")"
    pp_ratio="$(/usr/bin/python3 -c "print('%.2f' % ($s_pp / $d_pp))")"
    tg_ratios+=("$tg_ratio") pp_ratios+=("$pp_ratio")
    printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$round" "$(basename "$dense")" "$(basename "$sparse")" \
      "$d_tg" "$s_tg" "$tg_ratio" "$d_pp" "$s_pp" "$pp_ratio"
  done
  summary+=("$(/usr/bin/python3 -c "
import statistics, sys
tg = [float(x) for x in '${tg_ratios[*]}'.split()]
pp = [float(x) for x in '${pp_ratios[*]}'.split()]
print('| %s | %s | %.2fx (%.2f-%.2f) | %.2fx (%.2f-%.2f) |' % ('$(basename "$sparse")', '$(basename "$dense")',
      statistics.median(tg), min(tg), max(tg), statistics.median(pp), min(pp), max(pp)))")")
done
printf '\n| sparse | dense twin | decode ratio, median (range) | prefill ratio, median (range) |\n|---|---|---|---|\n'
printf '%s\n' "${summary[@]}"
