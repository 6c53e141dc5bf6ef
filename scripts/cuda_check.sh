#!/usr/bin/env bash
# The GPU checks of the CUDA backend in one run (issue #23), on a machine with an NVIDIA GPU,
# from a folder made by scripts/cuda_bundle.sh:
#   1. the GPU tests (backend_tests: CUDA logits against the CPU engine on every weight type,
#      stories260K's greedy text);
#   2. `peregrine bench -d cuda` on random-weight tinyllama-1.1b models written there by
#      `peregrine synth` (F16, BF16, Q8_0, Q4_0; pp512 / tg128; F16 also at batch 8 and 32),
#      each against the GPU's device-to-device copy bandwidth, and stories260K's decode (the
#      per-token cost that is not weight bandwidth);
#   3. Hugging Face transformers + PyTorch on the same F16 weights in HF form
#      (bench/cuda/hf_baseline.py) beside `peregrine bench -d cuda` on that folder, batch 1, 8, 32;
#   4. (issue #24) `peregrine serve -d cuda` on the tinyllama-1.1b F16 model under `peregrine
#      loadgen --stream` at 1, 8, 32, 128 concurrent clients (512-token prompts, 128 output
#      tokens, 2 requests per client), and transformers' static batching at the same batch sizes
#      and prompt length on the same weights (bench/cuda/hf_baseline.py --n-prompt 512).
# Logs go to $OUT (default /tmp/cuda-check); the models to $WORK (default /tmp/cuda-models).
#
# Usage: scripts/cuda_check.sh BUNDLE [tests|bench|hf|serve]...   (default: all four)
set -uo pipefail
bundle=$(realpath "$1")
shift
steps=${*:-tests bench hf serve}
here=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-/tmp/cuda-check}
work=${WORK:-/tmp/cuda-models}
mkdir -p "$out" "$work"

cublas=$(find /usr/local /opt /usr/lib -name 'libcublas.so.13' 2>/dev/null | head -1)
cudart=$(find /usr/local /opt /usr/lib -name 'libcudart.so.13' 2>/dev/null | head -1)
# The bundle's libraries for Peregrine's binaries only (python3 keeps the system's).
libs="$bundle/lib:$(dirname "${cublas:-/x/x}"):$(dirname "${cudart:-/x/x}")"
export PEREGRINE_SHARED_DIR="$bundle/shared" PEREGRINE_TESTDATA_DIR="$bundle/testdata"
pg() { LD_LIBRARY_PATH="$libs" "$bundle/bin/peregrine" "$@"; }
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv | tee "$out/gpu.txt"

if [[ " $steps " == *" tests "* ]]; then
  echo "== GPU tests"
  LD_LIBRARY_PATH="$libs" "$bundle/bin/backend_tests" 2>&1 | tee "$out/tests.log" | grep -E 'max \||OK|FAILED|PASSED|Failure|Expected|Which is|actual|error' | head -60
fi

if [[ " $steps " == *" bench "* ]]; then
  echo "== bench -d cuda, tinyllama-1.1b"
  for t in f16 bf16 q8_0 q4_0; do
    [[ -f "$work/tl-$t.gguf" ]] || pg synth --shape tinyllama-1.1b --dtype "$t" -o "$work/tl-$t.gguf" -t 16 >/dev/null
    pg bench -m "$work/tl-$t.gguf" -d cuda -p 512 -n 128 -r 3 2>&1 | tee -a "$out/bench.log"
  done
  for b in 8 32; do pg bench -m "$work/tl-f16.gguf" -d cuda -p 0 -n 128 -r 3 --batch "$b" 2>&1 | tee -a "$out/bench.log"; done
  # The per-token cost that is not weight bandwidth: a 5-layer model whose weights read in ~nothing.
  pg bench -m "$bundle/shared/models/stories260K/stories260K.gguf" -d cuda -p 0 -n 128 -r 3 2>&1 | tee -a "$out/bench.log"
fi

if [[ " $steps " == *" hf "* ]]; then
  echo "== transformers vs peregrine, same F16 weights (HF folder)"
  [[ -d "$work/tl-hf" ]] || pg synth --shape tinyllama-1.1b --dtype f16 --format safetensors -o "$work/tl-hf" -t 16 >/dev/null
  PYTHONUNBUFFERED=1 python3 "$here/bench/cuda/hf_baseline.py" "$work/tl-hf" --batch 1 8 32 --n-gen 128 2>&1 | grep -v Warning | tee "$out/hf.log"
  for b in 1 8 32; do pg bench -m "$work/tl-hf" -d cuda -p 0 -n 128 -r 3 --batch "$b" 2>&1 | tee -a "$out/hf.log"; done
fi

if [[ " $steps " == *" serve "* ]]; then
  echo "== serve -d cuda under loadgen, tinyllama-1.1b F16 (512-token prompts, 128 output tokens)"
  [[ -f "$work/tl-f16.gguf" ]] || pg synth --shape tinyllama-1.1b --dtype f16 -o "$work/tl-f16.gguf" -t 16 >/dev/null
  [[ -d "$work/tl-hf" ]] || pg synth --shape tinyllama-1.1b --dtype f16 --format safetensors -o "$work/tl-hf" -t 16 >/dev/null
  port=$((20000 + RANDOM % 20000))
  pg serve -d cuda -m "$work/tl-f16.gguf" --port "$port" --parallel 128 --ctx 768 --kv-type f16 \
    --max-batch-tokens 1024 --prefill-budget 512 -t 16 > "$out/serve.log" 2>&1 &
  server=$!
  for _ in $(seq 120); do grep -q listening "$out/serve.log" && break; sleep 1; done
  grep -E "listening|error" "$out/serve.log"
  for c in 1 8 32 128; do
    n=$((c < 2 ? 4 : 2 * c))
    pg loadgen -m "$work/tl-f16.gguf" --url "http://127.0.0.1:$port" --stream --json -c "$c" -n "$n" \
      --prompt-len 512 --max-tokens 128 > "$out/serve-c$c.json" || echo "loadgen -c $c failed"
  done
  kill "$server"; wait "$server" 2>/dev/null
  PYTHONUNBUFFERED=1 python3 "$here/bench/cuda/hf_baseline.py" "$work/tl-hf" --batch 1 8 32 128 --n-prompt 512 \
    --n-gen 128 --reps 1 2>&1 | grep -v Warning | tee "$out/hf-serve.log"
  python3 - "$out" <<'PY'
import json, re, sys
out = sys.argv[1]
hf = {}
for line in open(f"{out}/hf-serve.log"):
    if line.startswith("{"):
        hf = {int(k): v for k, v in json.loads(line)["hf_tokens_per_s"].items()}
print("| clients | out tok/s | TTFT p50 / p99 ms | ITL p50 / p99 ms | errors | transformers tok/s | ratio |")
print("|---|---|---|---|---|---|---|")
for c in (1, 8, 32, 128):
    try:
        j = json.load(open(f"{out}/serve-c{c}.json"))
    except (OSError, ValueError):
        print(f"| {c} | no result |"); continue
    err = sum(j["errors"].values()) if isinstance(j["errors"], dict) else j["errors"]
    base = hf.get(c)
    print(f"| {c} | {j['output_tps']:.1f} | {j['ttft_ms']['p50']:.0f} / {j['ttft_ms']['p99']:.0f} | "
          f"{j['itl_ms']['p50']:.1f} / {j['itl_ms']['p99']:.1f} | {err} | {base or 0:.1f} | "
          f"{j['output_tps'] / base if base else 0:.2f}x |")
PY
fi
