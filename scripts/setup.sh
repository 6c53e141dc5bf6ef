#!/usr/bin/env bash
# Installs Peregrine's dependencies: Debian 12 packages, and the project's Python virtual
# environment .venv/ (PyPI packages pinned in scripts/requirements.txt).
# Usage: scripts/setup.sh           everything the build and the whole test suite need
#        scripts/setup.sh --build   only what building and running `peregrine` needs (the
#                                   quickstart): no libtorch, Python oracles, clang or .venv
# (as root, or with sudo available). Every package that changes how the library compiles (MPI)
# is in the --build set, so the test suite's later build reuses what the quickstart built.
set -euo pipefail

build_packages=(
  build-essential cmake ninja-build pkg-config git python3
  libcli11-dev nlohmann-json3-dev libpcre2-dev libsentencepiece-dev
  libhwy-dev                            # Highway SIMD (kernels/cpu)
  libeigen3-dev                         # dense linear algebra (quant/gptq)
  libcpp-httplib-dev                    # HTTP server (server/) and client (loadgen)
  openmpi-bin libopenmpi-dev            # dist/: tensor parallelism across processes (mpirun)
  libgtest-dev libgmock-dev libssl-dev  # configuring the tests; libssl-dev: SHA-256 in the tests
)
test_packages=(
  libtorch-dev                          # the training layer (src/train: distill), PyTorch's C++ API
  python3-numpy python3-torch           # tools/reference.py, the test oracle
  python3-jinja2                        # chat templates rendered by jinja2 itself (tests/tokenizer)
  python3-regex                         # pre-tokenizer regexes as tokenizers runs them (tests/tokenizer)
  python3-venv                          # .venv: the openai client (server tests), pip for the models
  clang                                 # libFuzzer targets (scripts/fuzz.sh)
)
case "${1:-}" in
  "") packages=("${build_packages[@]}" "${test_packages[@]}") ;;
  --build) packages=("${build_packages[@]}") ;;
  *) echo "usage: scripts/setup.sh [--build]" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all packages already installed"
else
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

[ "${1:-}" = --build ] && exit 0

# The virtual environment, remade only when scripts/requirements.txt changed.
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="$root/.venv"
stamp="$venv/requirements.sha256"
want="$(sha256sum "$root/scripts/requirements.txt" | cut -d' ' -f1)"
if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  echo "setup: $venv up to date"
else
  echo "setup: making $venv (scripts/requirements.txt)"
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$root/scripts/requirements.txt"
  echo "$want" > "$stamp"
fi
