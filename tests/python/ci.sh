#!/usr/bin/env bash
# CI for the Python package: `pip install .` into a venv over Debian's python3 (so the installed
# extension and Debian's torch 1.13 live in one interpreter), `import mlpc`, then the Python tests.
# Usage: tests/python/ci.sh [VENV_DIR]   (default build-venv; scripts/setup.sh installs python3-venv)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
venv=${1:-$root/build-venv}
[[ $venv == /* ]] || venv=$PWD/$venv  # the import check below runs from /

/usr/bin/python3 -m venv --system-site-packages "$venv"
# Two jobs, as the rest of CI; the wheel builds only the libraries the extension links.
CMAKE_BUILD_PARALLEL_LEVEL=2 "$venv/bin/pip" install --quiet --disable-pip-version-check "$root"
(cd / && "$venv/bin/python" -c "import mlpc, mlpc._mlpc; print('import mlpc:', mlpc.__file__)")
"$venv/bin/python" "$root/tests/python/run_tests.py"
