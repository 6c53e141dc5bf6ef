#!/usr/bin/env bash
# Runs llama.cpp's own server test suite (tools/server/tests of a llama.cpp source tree) against
# `peregrine serve` and prints, per test file, how many tests passed, failed, and did not apply.
#
# Usage: tools/llamacpp_server_suite.sh LLAMA_CPP_SRC [TEST_FILE ...]
#   LLAMA_CPP_SRC  a llama.cpp checkout (nothing of it is copied here; only its tests run)
#   TEST_FILE      e.g. test_chat_completion.py (default: every unit/test_*.py)
# Environment: PEREGRINE_BIN (default build/bin/peregrine), PEREGRINE_SHIM_MODELS (see
# tools/llama_server_shim.py), SUITE_LOG_DIR (default /tmp/peregrine-llamacpp-suite: pytest's
# output per file).
#
# Each test starts the server with llama-server's flags; tools/llama_server_shim.py translates
# them into `peregrine serve`'s, or refuses a llama-server-only feature (the test then fails to
# start a server: counted under "llama-server only"). Tests of the bundled stories260K run
# offline; the suite's other models (bert-bge-small, tinygemma3, stories15M-MoE, jina-reranker)
# come from the Hugging Face hub, which is not reachable here: their tests fail at start and are
# counted under "no model".
# The Python packages (pytest, requests, wget, openai) are in the project's .venv
# (scripts/setup.sh).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
src="${1:?usage: tools/llamacpp_server_suite.sh LLAMA_CPP_SRC [TEST_FILE ...]}"
shift
tests="$src/tools/server/tests"
[ -d "$tests/unit" ] || { echo "error: $tests/unit not found (not a llama.cpp source tree?)" >&2; exit 2; }
python="$root/.venv/bin/python"
[ -x "$python" ] || { echo "error: $python missing: run scripts/setup.sh" >&2; exit 2; }
export PEREGRINE_BIN="${PEREGRINE_BIN:-$root/build/bin/peregrine}"
[ -x "$PEREGRINE_BIN" ] || { echo "error: $PEREGRINE_BIN missing: build first (scripts/build.sh)" >&2; exit 2; }
export LLAMA_SERVER_BIN_PATH="$root/tools/llama_server_shim.py"
logs="${SUITE_LOG_DIR:-/tmp/peregrine-llamacpp-suite}"
mkdir -p "$logs"

files=("$@")
if [ ${#files[@]} -eq 0 ]; then
  for f in "$tests"/unit/test_*.py; do files+=("$(basename "$f")"); done
fi

printf '| test file | passed | failed | llama-server only | no model | skipped |\n|---|---|---|---|---|---|\n'
for file in "${files[@]}"; do
  log="$logs/${file%.py}.log"
  results="$logs/${file%.py}.jsonl"
  rm -f "$results"
  # -p no:cacheprovider: write nothing into the llama.cpp tree; the plugin classifies outcomes.
  (cd "$tests" && SUITE_RESULTS="$results" PYTHONPATH="$root/tools" timeout 1800 "$python" -m pytest \
    -p no:cacheprovider -p llama_server_suite_plugin -q -rA "unit/$file" >"$log" 2>&1) || true
  "$python" - "$file" "$results" <<'PY'
import collections, json, os, sys
order = ["llama-server only", "no model", "failed", "skipped", "passed"]  # a test's worst outcome counts
worst = {}
if os.path.exists(sys.argv[2]):
    for line in open(sys.argv[2]):
        r = json.loads(line)
        worst[r["test"]] = min(worst.get(r["test"], "passed"), r["outcome"], key=order.index)
n = collections.Counter(worst.values())
print(f"| {sys.argv[1]} | {n['passed']} | {n['failed']} | {n['llama-server only']} | {n['no model']} | {n['skipped']} |")
PY
done
echo "pytest's output per file: $logs"
