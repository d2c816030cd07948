#!/usr/bin/env bash
# Stages what a device call runs into stage/ (ignored by git, carried by the device tool):
# stage/bin/{mlpc, mlpc_gpu_tests, geglu_example} from BUILD_DIR (the example built against
# BUILD_DIR's install), and stage/py/mlpc from a wheel built for the GPU machine's Python.
# Usage: bench/stage_gpu.sh BUILD_DIR [WHEEL]
set -euo pipefail
build=${1:?usage: bench/stage_gpu.sh BUILD_DIR [WHEEL]}
wheel=${2:-}
mkdir -p stage/bin
cmake --build "$build" -j2 --target mlpc mlpc_gpu_tests
cp "$build/compiler/mlpc" "$build/tests/mlpc_gpu_tests" stage/bin/
cmake --install "$build" --prefix "$build-install" > /dev/null
cmake -S examples/cpp -B "$build-example" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$PWD/$build-install" > /dev/null
cmake --build "$build-example" -j2
cp "$build-example/geglu_example" stage/bin/
if [[ -n $wheel ]]; then
  rm -rf stage/py && mkdir -p stage/py
  python3 -m zipfile -e "$wheel" stage/py
fi
du -sh stage
