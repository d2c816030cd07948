#!/usr/bin/env bash
# Installs what building mlpc needs, only what is missing, and checks for the CUDA toolkit.
# Quiet when everything is already there. Debian/Ubuntu only (apt-get, dpkg).
set -euo pipefail

packages=(cmake g++ libfmt-dev catch2 libcli11-dev nlohmann-json3-dev)
# The fuzz targets (-DMLPC_FUZZ=ON): clang 16 or newer (older ones reject lambdas that capture
# structured bindings, which C++20 allows) and its libFuzzer runtime.
packages+=(clang-16 libclang-rt-16-dev)
# Graphviz: `dot` renders the dump folder's graph.dot, and the dump tests check that it can.
packages+=(graphviz)
# PyTorch (CPU, 1.13) for the end-to-end test against PyTorch (tests/torch_e2e.sh); about 3 min.
packages+=(python3-torch)
# The Python package's CI (tests/python/ci.sh): a venv over Debian's python3, its headers.
packages+=(python3-venv python3-dev)

installed() {
  dpkg -s "$1" 2>/dev/null | grep -q '^Status: install ok installed$'
}

missing=()
for p in "${packages[@]}"; do
  installed "$p" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "setup.sh: installing ${missing[*]}"
  sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    if ! command -v sudo >/dev/null; then
      echo "setup.sh: error: need root (or sudo) to install: ${missing[*]}" >&2
      exit 1
    fi
    sudo=(sudo)
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The CUDA toolkit (headers, cuBLASLt, NVRTC) is needed to build; a GPU and a driver are not.
# It is not installed here: dev and CI machines come with the CUDA 13 toolkit in /usr/local/cuda.
cuda_home=${CUDA_HOME:-${CUDA_PATH:-/usr/local/cuda}}
if ! command -v nvcc >/dev/null && [[ ! -x $cuda_home/bin/nvcc ]] &&
   [[ ! -f $cuda_home/include/cuda_bf16.h ]]; then
  cat >&2 <<MSG
setup.sh: error: the CUDA toolkit was not found (no nvcc on PATH, no $cuda_home/bin/nvcc,
no $cuda_home/include/cuda_bf16.h). mlpc needs the CUDA toolkit (12.4 or newer; CUDA 13 on
dev and CI machines) for its headers, cuBLASLt and NVRTC; no GPU or driver is needed.
Install it from NVIDIA's apt repository (e.g. cuda-toolkit-13-0), or set CUDA_HOME to it.
MSG
  exit 1
fi
