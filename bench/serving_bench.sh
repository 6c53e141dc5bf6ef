#!/usr/bin/env bash
# Serving benchmark: `peregrine serve` under `peregrine loadgen --stream` (128-token prompts,
# 128 output tokens each, ignore_eos), and, given a llama-server binary, llama-server on the same
# GGUF file with the same load in the same run, side by side.
#
# Usage: bench/serving_bench.sh [--llama-server PATH] [--model M.gguf] [--threads N]
#                               [--clients "1 8 32"] [--prefill-budget "32"] [--out DIR]
#   --llama-server   a llama-server binary (llama.cpp built by hand, outside this repository;
#                    DEVELOPERS.md); it runs with -np = clients, a 512-token context per slot
#   --model          default: a tinyllama-1.1b Q4_0 synth model (made with `peregrine synth`)
#   --clients        concurrent streaming clients per run (2·clients requests; 4 for one)
#   --prefill-budget Peregrine runs once per value (serve --prefill-budget; 0 = none); a value
#                    B:S also sets serve --step-budget S (else serve's default)
# Per client count: llama-server (if given), Peregrine at each budget, llama-server again; the
# llama-server figure is the mean of its two runs (the machine's speed drifts), and every
# Peregrine row carries its ratios to it. "out tok/s" counts the completed requests' tokens;
# "streamed tok/s" every text chunk streamed, the streams a server ended with an error partway
# included (llama-server does that on some random-weight text: "The model produced output that
# does not match the expected Content-only format"). Without --llama-server, Peregrine alone, plus the
# TTFT of a 1024-token shared prefix served cold and then from the prefix cache.
#
# LoRA case: bench/serving_bench.sh --loras N [--lora-rank R] [--rounds K] [--clients "8"] [--model M]
#   --loras N      N random adapters of rank R (default 16) on every linear (q, k, v, o, gate,
#                  up, down), made by `peregrine lora synth` (seeds 1..N, kept in --out);
#   --rounds K     (default 2) per client count, K rounds of: the base alone (no adapter loaded,
#                  requests without "model"), then serve with the N adapters and requests cycling
#                  through their names (loadgen --models), the same load otherwise (--clients,
#                  default 8; the first --prefill-budget). Prints each run's tokens/s and the
#                  ratio LoRA / base per round and of the means (issue #21: >= 0.80 with 8 adapters
#                  and 8 clients). --bin runs another peregrine binary (an older build: before/after).
#
# Across processes: bench/serving_bench.sh [--tensor] [--disaggregate] [--pipeline "1 2"]
#                                          [--rounds K] [--clients "8"] [--model M]
#   per round, one `serve -t THREADS`, then with --tensor `mpirun -np 2 serve --tp 2 -t T/2`,
#   with --disaggregate the pair `mpirun -np 1 serve --role decode -t T/2 : -np 1 serve --role
#   prefill -t T/2`, and with --pipeline `mpirun -np 2
#   serve --pp 2 -t T/2 --pp-micro-batches M` for each M listed (the same prefill budget, the
#   first --prefill-budget; the same load); prints each run's tokens/s, TTFT and ITL, the pair's
#   KV bytes shipped, and each case's ratios to one process.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=build/bin/peregrine
LLAMA_SERVER="" MODEL="" THREADS=2 CLIENTS="" BUDGETS=8 OUT=build/serving-bench LORAS=0 LORA_RANK=16 ROUNDS=2 CASES=""
while [ $# -gt 0 ]; do
  case "$1" in
    --llama-server) LLAMA_SERVER="$2"; shift 2 ;;
    --model) MODEL="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    --clients) CLIENTS="$2"; shift 2 ;;
    --prefill-budget) BUDGETS="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --loras) LORAS="$2"; shift 2 ;;
    --lora-rank) LORA_RANK="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --bin) BIN="$2"; shift 2 ;;
    --disaggregate) CASES="$CASES pair"; shift ;;
    --tensor) CASES="$CASES tp2"; shift ;;
    --pipeline) for m in $2; do CASES="$CASES pp2-mb$m"; done; shift 2 ;;
    *) echo "unknown argument: $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
if [ -z "$CLIENTS" ]; then if [ "$LORAS" -gt 0 ] || [ -n "$CASES" ]; then CLIENTS=8; else CLIENTS="1 8 32"; fi; fi
mkdir -p "$OUT"
rm -f "$OUT"/*.json  # no figure of an earlier run in this table
MODEL=${MODEL:-$OUT/tinyllama-1.1b-q4_0.gguf}
[ -f "$MODEL" ] || "$BIN" synth --shape tinyllama-1.1b --dtype q4_0 -o "$MODEL"
[ -z "$LLAMA_SERVER" ] || [ -x "$LLAMA_SERVER" ] || { echo "not an executable: $LLAMA_SERVER" >&2; exit 2; }

SERVER=""
stop_server() { [ -z "$SERVER" ] || { kill -TERM "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; SERVER=""; }; }
trap stop_server EXIT
# wait_url LOG: sets URL to the base URL once the server answers /health (empty after 120 s).
wait_url() {
  URL=""
  for _ in $(seq 1200); do
    local url
    url=$(grep -o 'http://[0-9.]*:[0-9]*' "$1" | head -1 || true)
    if [ -n "$url" ] && curl -sf "$url/health" >/dev/null 2>&1; then URL="$url"; return; fi
    sleep 0.1
  done
}
start_peregrine() {  # CLIENTS BUDGET [SERVE ARGS...] (in this shell: SERVER and URL are set)
  local c="$1" b="$2"
  shift 2
  "$BIN" serve -m "$MODEL" -t "$THREADS" --port 0 --parallel "$c" --max-queue 256 --ctx 2048 \
    --ctx-total 65536 --prefill-budget "$b" "$@" > "$OUT/serve.log" 2>&1 &
  SERVER=$!
  wait_url "$OUT/serve.log"
}
start_case() {  # CASE CLIENTS BUDGET: one process, the prefill / decode pair, or pp2-mbM, under mpirun
  local half=$(( THREADS / 2 > 0 ? THREADS / 2 : 1 )) common=(-m "$MODEL" --port 0 --parallel "$2" --max-queue 256 --ctx 2048 --ctx-total 65536 --prefill-budget "$3")
  local mpi=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1 mpirun --oversubscribe)
  case "$1" in
    one) start_peregrine "$2" "$3"; return ;;
    pair) "${mpi[@]}" -np 1 "$BIN" serve --role decode "${common[@]}" -t "$half" : \
            -np 1 "$BIN" serve --role prefill -m "$MODEL" -t "$half" --ctx 2048 > "$OUT/serve.log" 2>&1 & ;;
    tp2) "${mpi[@]}" -np 2 "$BIN" serve --tp 2 "${common[@]}" -t "$half" > "$OUT/serve.log" 2>&1 & ;;
    pp2-mb*) "${mpi[@]}" -np 2 "$BIN" serve --pp 2 --pp-micro-batches "${1#pp2-mb}" "${common[@]}" -t "$half" > "$OUT/serve.log" 2>&1 & ;;
  esac
  SERVER=$!
  wait_url "$OUT/serve.log"
}
start_llama() {  # CLIENTS
  local port=$((20000 + RANDOM % 20000))
  echo "http://127.0.0.1:$port" > "$OUT/llama-server.log"
  "$LLAMA_SERVER" -m "$MODEL" -t "$THREADS" -np "$1" -c $((512 * $1)) --host 127.0.0.1 --port "$port" \
    >> "$OUT/llama-server.log" 2>&1 &
  SERVER=$!
  wait_url "$OUT/llama-server.log"
}
run_load() {  # URL CLIENTS NAME [LOADGEN ARGS...] → $OUT/NAME.json
  local url="$1" c="$2" name="$3" n=$(($2 < 2 ? 4 : 2 * $2))
  shift 3
  "$BIN" loadgen -m "$MODEL" --url "$url" --stream --json -c "$c" -n "$n" --prompt-len 128 --max-tokens 128 "$@" > "$OUT/$name.json"
}
measure() {  # ENGINE CLIENTS TAG [BUDGET[:STEP BUDGET]] → $OUT/ENGINE-c<clients>-<tag>.json
  if [ "$1" = llama ]; then
    start_llama "$2"
  elif [ "${4#*:}" != "$4" ]; then
    start_peregrine "$2" "${4%%:*}" --step-budget "${4#*:}"
  else
    start_peregrine "$2" "$4"
  fi
  [ -n "$URL" ] || { echo "$1 did not start, see $OUT" >&2; exit 1; }
  run_load "$URL" "$2" "$1-c$2-$3"
  stop_server
}

if [ "$LORAS" -gt 0 ]; then
  BUDGET=${BUDGETS%% *}
  BUDGET=${BUDGET%%:*}  # the prefill budget of B:S
  SERVE_LORAS=() NAMES=""
  for i in $(seq "$LORAS"); do
    dir="$OUT/lora-r$LORA_RANK-$i"
    [ -f "$dir/adapter_model.safetensors" ] || "$BIN" lora synth -m "$MODEL" -o "$dir" --rank "$LORA_RANK" --alpha $((2 * LORA_RANK)) --seed "$i" >/dev/null
    SERVE_LORAS+=(--lora "lora$i=$dir")
    NAMES="$NAMES${NAMES:+,}lora$i"
  done
  for c in $CLIENTS; do
    for r in $(seq "$ROUNDS"); do
      start_peregrine "$c" "$BUDGET"
      [ -n "$URL" ] || { echo "peregrine did not start, see $OUT" >&2; exit 1; }
      run_load "$URL" "$c" "lora-base-c$c-r$r"
      stop_server
      start_peregrine "$c" "$BUDGET" "${SERVE_LORAS[@]}"
      [ -n "$URL" ] || { echo "peregrine with $LORAS adapters did not start, see $OUT" >&2; exit 1; }
      run_load "$URL" "$c" "lora-n$LORAS-c$c-r$r" --models "$NAMES"
      stop_server
    done
  done
  /usr/bin/python3 - "$OUT" "$LORAS" "$LORA_RANK" "$ROUNDS" "$MODEL" $CLIENTS <<'PY'
import json, sys
out, loras, rank, rounds, model, clients = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6:]
load = lambda name: json.load(open(f"{out}/{name}.json"))
errors = lambda j: sum(j["errors"].values())
print(f"model {model}; {loras} adapters of rank {rank} on every linear vs the base alone, same load, alternated")
print("| case | clients | round | out tok/s | TTFT p50 ms | ITL p50 / p99 ms | errors | LoRA / base |")
print("|---|---|---|---|---|---|---|---|")
for c in clients:
    base_tps, lora_tps = [], []
    for r in range(1, rounds + 1):
        b, l = load(f"lora-base-c{c}-r{r}"), load(f"lora-n{loras}-c{c}-r{r}")
        base_tps.append(b["output_tps"]); lora_tps.append(l["output_tps"])
        for label, j, ratio in (("base alone", b, ""), (f"{loras} adapters, rank {rank}", l, f"{l['output_tps'] / b['output_tps']:.3f}")):
            print(f"| {label} | {c} | {r} | {j['output_tps']:.2f} | {j['ttft_ms']['p50']:.0f} | "
                  f"{j['itl_ms']['p50']:.1f} / {j['itl_ms']['p99']:.1f} | {errors(j)} | {ratio} |")
    mb, ml = sum(base_tps) / rounds, sum(lora_tps) / rounds
    print(f"clients {c}: base {mb:.2f} tok/s, {loras} adapters {ml:.2f} tok/s (means of {rounds} rounds), LoRA / base = {ml / mb:.3f}")
PY
  exit 0
fi

if [ -n "$CASES" ]; then
  BUDGET=${BUDGETS%% *}
  BUDGET=${BUDGET%%:*}  # the prefill budget of B:S
  for c in $CLIENTS; do
    for r in $(seq "$ROUNDS"); do
      for case in one $CASES; do
        start_case "$case" "$c" "$BUDGET"
        [ -n "$URL" ] || { echo "$case did not start, see $OUT/serve.log" >&2; exit 1; }
        run_load "$URL" "$c" "$case-c$c-r$r"
        curl -s "$URL/metrics" | awk '/^peregrine_kv_bytes_shipped_total /{print $2}' > "$OUT/$case-c$c-r$r.kv"
        stop_server
      done
    done
  done
  /usr/bin/python3 - "$OUT" "$ROUNDS" "$MODEL" "$THREADS" "one $CASES" $CLIENTS <<'PY'
import json, sys
out, rounds, model, threads, cases, clients = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5].split(), sys.argv[6:]
load = lambda name: json.load(open(f"{out}/{name}.json"))
half = max(threads // 2, 1)
labels = {"one": f"one process × {threads} threads", "pair": f"prefill / decode pair × {half} + {half}",
          "tp2": f"--tp 2 × {half} thread(s)"}
label = lambda case: labels[case] if case in labels else f"--pp 2 × {half} thread(s), {case.split('mb')[1]} micro-batches"
print(f"model {model}; the same load on each, alternated per round")
print("| case | clients | round | out tok/s | TTFT p50 / p99 ms | ITL p50 / p99 ms | errors | KV MB shipped |")
print("|---|---|---|---|---|---|---|---|")
for c in clients:
    means = {case: [0.0, 0.0, 0.0] for case in cases}
    for r in range(1, rounds + 1):
        for case in cases:
            j = load(f"{case}-c{c}-r{r}")
            kv = open(f"{out}/{case}-c{c}-r{r}.kv").read().strip()
            kv = f"{float(kv) / 1e6:.1f}" if kv and float(kv) > 0 else ""
            print(f"| {label(case)} | {c} | {r} | {j['output_tps']:.2f} | {j['ttft_ms']['p50']:.0f} / {j['ttft_ms']['p99']:.0f} | "
                  f"{j['itl_ms']['p50']:.1f} / {j['itl_ms']['p99']:.1f} | {sum(j['errors'].values())} | {kv} |")
            for i, v in enumerate((j["output_tps"], j["ttft_ms"]["p99"], j["itl_ms"]["p99"])): means[case][i] += v / rounds
    o = means["one"]
    for case in cases[1:]:
        m = means[case]
        print(f"clients {c}, means of {rounds} rounds, {label(case)} / one process: tok/s {m[0] / o[0]:.3f}, "
              f"TTFT p99 {m[1] / o[1]:.3f}, ITL p99 {m[2] / o[2]:.3f}")
PY
  exit 0
fi

for c in $CLIENTS; do
  [ -z "$LLAMA_SERVER" ] || measure llama "$c" 1
  for b in $BUDGETS; do measure peregrine "$c" "b${b/:/-s}" "$b"; done
  [ -z "$LLAMA_SERVER" ] || measure llama "$c" 2
done
if [ -z "$LLAMA_SERVER" ]; then
  start_peregrine 1 0
  "$BIN" loadgen -m "$MODEL" --url "$URL" --stream --json -c 1 -n 1 --prompt-len 1056 --shared-prefix 1024 --max-tokens 4 --seed 1 > "$OUT/prefix-cold.json"
  "$BIN" loadgen -m "$MODEL" --url "$URL" --stream --json -c 1 -n 1 --prompt-len 1056 --shared-prefix 1024 --max-tokens 4 --seed 2 > "$OUT/prefix-warm.json"
  stop_server
fi
/usr/bin/python3 - "$OUT" $CLIENTS -- $BUDGETS <<'PY'
import json, os, sys
out = sys.argv[1]
sep = sys.argv.index("--")
clients, budgets = sys.argv[2:sep], sys.argv[sep + 1:]
def load(name):
    path = f"{out}/{name}.json"
    return json.load(open(path)) if os.path.exists(path) else None
def errors(j): return sum(j["errors"].values()) if isinstance(j["errors"], dict) else j["errors"]
print("| engine | clients | out tok/s | streamed tok/s | TTFT p50 / p99 ms | ITL p50 / p99 ms | ITL p99/p50 | errors | vs llama-server: tok/s, streamed, TTFT p99, ITL p99 |")
print("|---|---|---|---|---|---|---|---|---|")
for c in clients:
    llama = [j for j in (load(f"llama-c{c}-1"), load(f"llama-c{c}-2")) if j]
    mean = lambda f: sum(f(j) for j in llama) / len(llama)
    rows = [("llama-server (mean of 2 runs)" if len(llama) > 1 else "llama-server", None)] if llama else []
    rows += [(f"Peregrine, prefill budget {b.replace(':', ', step budget ')}", load(f"peregrine-c{c}-b{b.replace(':', '-s')}"))
             for b in budgets]
    for label, j in rows:
        if j is None:  # the llama-server row: means of its runs
            v = [mean(lambda x: x["output_tps"]), mean(lambda x: x["ttft_ms"]["p50"]), mean(lambda x: x["ttft_ms"]["p99"]),
                 mean(lambda x: x["itl_ms"]["p50"]), mean(lambda x: x["itl_ms"]["p99"]), mean(lambda x: x["streamed_cps"])]
            err, ref = sum(errors(x) for x in llama), ""
        else:
            v = [j["output_tps"], j["ttft_ms"]["p50"], j["ttft_ms"]["p99"], j["itl_ms"]["p50"], j["itl_ms"]["p99"], j["streamed_cps"]]
            err = errors(j)
            ref = (f"{v[0] / mean(lambda x: x['output_tps']):.2f}×, {v[5] / mean(lambda x: x['streamed_cps']):.2f}×, "
                   f"{v[2] / mean(lambda x: x['ttft_ms']['p99']):.2f}×, {v[4] / mean(lambda x: x['itl_ms']['p99']):.2f}×") if llama else ""
        print(f"| {label} | {c} | {v[0]:.1f} | {v[5]:.1f} | {v[1]:.0f} / {v[2]:.0f} | {v[3]:.1f} / {v[4]:.1f} | {v[4] / v[3]:.2f} | {err} | {ref} |")
cold, warm = load("prefix-cold"), load("prefix-warm")
if cold and warm:
    c, w = cold["ttft_ms"]["p50"], warm["ttft_ms"]["p50"]
    print(f"1024-token shared prefix TTFT: first {c:.0f} ms, second {w:.0f} ms ({c / w:.1f}x lower)")
PY
