#!/usr/bin/env bash
# Serving benchmark (issue #4's targets): `peregrine serve` on MODEL, then `peregrine loadgen`
# at 1, 8 and 32 concurrent streaming clients (128-token prompts, 128 output tokens each,
# ignore_eos), then the TTFT of one request with a 1024-token prefix the first time (cold) and
# the second time (prefix-cache hit) it is served. Prints each loadgen JSON line and a summary.
# Usage: bench/serving_bench.sh [MODEL] [THREADS] [OUT_DIR]
#   MODEL defaults to a tinyllama-1.1b Q4_0 synth model (made with `peregrine synth` if absent).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=build/bin/peregrine
OUT=${3:-build/serving-bench}
MODEL=${1:-$OUT/tinyllama-1.1b-q4_0.gguf}
THREADS=${2:-2}
mkdir -p "$OUT"
[ -f "$MODEL" ] || "$BIN" synth --shape tinyllama-1.1b --dtype q4_0 -o "$MODEL"

"$BIN" serve -m "$MODEL" -t "$THREADS" --port 0 --parallel 32 --max-queue 64 --ctx 2048 \
  --ctx-total 65536 --max-batch-tokens 512 2> "$OUT/serve.log" &
SERVER=$!
trap 'kill -TERM $SERVER 2>/dev/null || true; wait $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 1200); do grep -q "listening on" "$OUT/serve.log" && break; sleep 0.1; done
URL=$(grep -o 'http://[0-9.]*:[0-9]*' "$OUT/serve.log" | head -1)
[ -n "$URL" ] || { echo "serve did not start:"; cat "$OUT/serve.log"; exit 1; }

loadgen() { "$BIN" loadgen -m "$MODEL" --url "$URL" --stream --json "$@"; }
for c in 1 8 32; do
  n=$(( c < 2 ? 4 : 2 * c ))
  loadgen -c "$c" -n "$n" --prompt-len 128 --max-tokens 128 | tee "$OUT/clients-$c.json"
done
loadgen -c 1 -n 1 --prompt-len 1056 --shared-prefix 1024 --max-tokens 4 --seed 1 | tee "$OUT/prefix-cold.json"
loadgen -c 1 -n 1 --prompt-len 1056 --shared-prefix 1024 --max-tokens 4 --seed 2 | tee "$OUT/prefix-warm.json"

/usr/bin/python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
r = {c: json.load(open(f"{out}/clients-{c}.json")) for c in (1, 8, 32)}
print(f"{'clients':>7} {'req/s':>7} {'out tok/s':>9} {'TTFT p50/p99 ms':>17} {'ITL p50/p99 ms':>15} errors")
for c, j in r.items():
    print(f"{c:>7} {j['req_per_s']:7.2f} {j['output_tps']:9.1f} {j['ttft_ms']['p50']:8.0f}/{j['ttft_ms']['p99']:<8.0f} "
          f"{j['itl_ms']['p50']:7.1f}/{j['itl_ms']['p99']:<7.1f} {j['errors']}")
print(f"output tokens/s, 8 clients / 1 client: {r[8]['output_tps'] / r[1]['output_tps']:.2f}x")
cold = json.load(open(f"{out}/prefix-cold.json"))["ttft_ms"]["p50"]
warm = json.load(open(f"{out}/prefix-warm.json"))["ttft_ms"]["p50"]
print(f"1024-token shared prefix TTFT: first {cold:.0f} ms, second {warm:.0f} ms ({cold / warm:.1f}x lower)")
PY
