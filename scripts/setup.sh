#!/usr/bin/env bash
# Installs Peregrine's build and test dependencies from Debian 12 packages.
# Usage: scripts/setup.sh   (as root, or with sudo available)
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libcli11-dev nlohmann-json3-dev libpcre2-dev libsentencepiece-dev
  libhwy-dev                            # Highway SIMD (kernels/cpu)
  libeigen3-dev                         # dense linear algebra (quant/gptq)
  libcpp-httplib-dev                    # HTTP server (server/) and client (loadgen)
  openmpi-bin libopenmpi-dev            # dist/: tensor parallelism across processes (mpirun)
  libtorch-dev                          # the training layer (src/train: distill), PyTorch's C++ API
  libgtest-dev libgmock-dev libssl-dev  # libssl-dev: SHA-256 in the tests
  python3 python3-numpy python3-torch   # tools/reference.py, the test oracle
  python3-jinja2                        # chat templates rendered by jinja2 itself (tests/tokenizer)
  python3-regex                         # pre-tokenizer regexes as tokenizers runs them (tests/tokenizer)
  clang                                 # libFuzzer targets (scripts/fuzz.sh)
)
# The server tests drive `serve` with the official openai npm package. A machine may already
# have Node from elsewhere (NodeSource bundles npm, conflicting with Debian's npm package).
command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all packages already installed"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "setup: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
