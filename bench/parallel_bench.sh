#!/usr/bin/env bash
# Decode across processes against one process, on one machine (issue #22): per round,
# `peregrine bench` with T threads in one process, then TP=2 × T/2 threads (`mpirun -np 2 ... --tp
# 2`) and PP=2 × T/2 threads (`--pp 2`), each `-p 0 -n N -r 3 --profile --json`; prints each run's
# decode tok/s and, per mode, the median over rounds and its ratio to one process, the per-rank
# weight GB/s of the matmuls and the time of one all-reduce (TP), then the cost model's
# prediction for each measured run (tools/parallel_cost_model.py --measured).
#
# Usage: bench/parallel_bench.sh MODEL.gguf [ROUNDS=3] [N_GEN=64] [THREADS=2] [OUT_DIR=build/parallel-bench]
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:?usage: bench/parallel_bench.sh MODEL.gguf [ROUNDS] [N_GEN] [THREADS] [OUT_DIR]}
ROUNDS=${2:-3} N_GEN=${3:-64} THREADS=${4:-2} OUT=${5:-build/parallel-bench}
BIN=build/bin/peregrine
command -v mpirun >/dev/null || { echo "mpirun not found: install openmpi-bin (scripts/setup.sh)" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # CI and this VM run as root
PER_RANK=$(( THREADS / 2 > 0 ? THREADS / 2 : 1 ))
mkdir -p "$OUT"
rm -f "$OUT"/*.json
ARGS=(bench -m "$MODEL" -p 0 -n "$N_GEN" -r 3 --profile --json)
for round in $(seq 1 "$ROUNDS"); do
  "$BIN" "${ARGS[@]}" -t "$THREADS" > "$OUT/one-$round.json"
  mpirun --oversubscribe -np 2 "$BIN" "${ARGS[@]}" -t "$PER_RANK" --tp 2 > "$OUT/tp2-$round.json"
  mpirun --oversubscribe -np 2 "$BIN" "${ARGS[@]}" -t "$PER_RANK" --pp 2 > "$OUT/pp2-$round.json"
done
"$BIN" inspect -m "$MODEL" > "$OUT/inspect.txt"
python3 - "$OUT" "$ROUNDS" "$THREADS" "$PER_RANK" <<'PY'
import json, re, statistics, sys
out, rounds, threads, per_rank = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
shape = re.search(r"dim (\d+), layers (\d+)", open(f"{out}/inspect.txt").read())
dim, n_layers = int(shape.group(1)), int(shape.group(2))
one = json.load(open(f"{out}/one-1.json"))
weights = one["tg_weight_bytes"]  # bytes one decode token reads in one process: W
modes = [("one", f"1 process × {threads} threads", 1), ("tp2", f"TP=2 × {per_rank} thread(s)", 2),
         ("pp2", f"PP=2 × {per_rank} thread(s)", 2)]
def run(mode, r):
    j = json.load(open(f"{out}/{mode}-{r}.json"))
    ops = {p["op"]: p for p in j["tg_profile"]}
    mm = [p for p in j["tg_profile"] if p["gbps"] > 0 and p["op"] != "forward (total)"]
    gb = sum(p["gbps"] * p["ms"] for p in mm) / sum(p["ms"] for p in mm)  # weight bytes / matmul time
    ar = ops.get("tp all-reduce", {}).get("ms", 0.0)
    return j["tg_tps"], gb, ar * 1000 / (2 * n_layers)  # µs per all-reduce
print(f"model {one['model']}: dim {dim}, {n_layers} layers, {weights / 1e9:.3f} GB of weights read per decode token")
print("| mode | decode tok/s per round | median | vs 1 process | matmul GB/s per rank | µs per all-reduce |")
print("|---|---|---|---|---|---|")
base = None
records = []
for mode, label, ranks in modes:
    runs = [run(mode, r) for r in range(1, rounds + 1)]
    tps = [x[0] for x in runs]
    med = statistics.median(tps)
    base = base or med
    gb = statistics.median(x[1] for x in runs)
    ar = statistics.median(x[2] for x in runs)
    print(f"| {label} | {' / '.join(f'{t:.2f}' for t in tps)} | {med:.2f} | {med / base:.3f} | {gb:.1f} | {ar:.1f} |" if mode == "tp2" else
          f"| {label} | {' / '.join(f'{t:.2f}' for t in tps)} | {med:.2f} | {med / base:.3f} | {gb:.1f} | - |")
    records.append({"model": one["model"], "dim": dim, "layers": n_layers, "params": weights, "bytes_per_param": 1,
                    "mode": mode, "ranks": ranks, "decode_tps": med, "mem_bw_gbs": gb,
                    "allreduce_us": ar if mode == "tp2" else None})
json.dump(records, open(f"{out}/runs.json", "w"), indent=1)
PY
python3 tools/parallel_cost_model.py --measured "$OUT/runs.json"
