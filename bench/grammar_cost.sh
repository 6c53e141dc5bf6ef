#!/usr/bin/env bash
# What grammar-constrained decoding costs: `peregrine generate` of the same chat prompt with and
# without a JSON schema (response_format json_schema's path: json_schema_grammar.h → the grammar
# matcher's masks), alternating, in one run on one machine. Each run is a fresh process, so the
# grammar's one-time work (the vocabulary trie, the first walk of each stack top) is inside the
# constrained run's decode time.
#
# Usage: bench/grammar_cost.sh MODEL.gguf ROUNDS [THREADS]
#   e.g. bench/grammar_cost.sh models/cache/qwen2.5-coder-0.5b-instruct.gguf 5   (151,936 tokens)
# Prints each round's decode tokens/s of both, then the median ratio constrained / free.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${PEREGRINE_BIN:-$root/build/bin/peregrine}"
usage="usage: $0 MODEL.gguf ROUNDS [THREADS]"
model="${1:?$usage}"
rounds="${2:?$usage}"
threads="${3:-2}"
schema='{"type": "object", "properties": {"cats": {"type": "array", "minItems": 3, "maxItems": 3, "items": {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}, "colors": {"type": "array", "items": {"type": "string"}}, "description": {"type": "string"}}, "required": ["name", "age", "colors", "description"]}}}, "required": ["cats"]}'
prompt="Describe three cats as JSON: a list 'cats' of objects with name, age, colors and a one-sentence description."
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# decode tokens/s of one run; $1 = free|schema
rate() {
  local extra=()
  [ "$1" = schema ] && extra=(--json-schema "$schema")
  "$bin" generate -m "$model" --chat -p "$prompt" -n 400 --temp 0 -t "$threads" --no-echo \
    --stats-json "$tmp/stats.json" "${extra[@]}" > /dev/null 2>&1
  /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["decode_tps"])' "$tmp/stats.json"
}

printf '| round | free tok/s | json_schema tok/s | ratio |\n|---|---|---|---|\n'
ratios=()
for r in $(seq "$rounds"); do
  free=$(rate free)
  constrained=$(rate schema)
  ratio=$(/usr/bin/python3 -c "print(f'{$constrained / $free:.3f}')")
  ratios+=("$ratio")
  printf '| %d | %.1f | %.1f | %s |\n' "$r" "$free" "$constrained" "$ratio"
done
/usr/bin/python3 -c "import statistics,sys; r=[float(x) for x in sys.argv[1:]]; print(f'median constrained / free decode: {statistics.median(r):.3f} (range {min(r):.3f}-{max(r):.3f})')" "${ratios[@]}"
