#!/usr/bin/env bash
# Set-up command 2: installs what is missing, builds everything and runs every test that needs no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
# Reference libraries for the parity tests (pinned), from PyPI.
python3 -m pip install -q --disable-pip-version-check -r tests/requirements.txt
cmake --preset cpu >/dev/null
cmake --build --preset cpu
ctest --preset cpu
# The CUDA backend and its GPU tests compile wherever the CUDA toolkit is; they run on the GPU machine
# (scripts/gpu_visit.sh, CTest label gpu).
if [ -x /usr/local/cuda/bin/nvcc ]; then
  cmake --preset cuda >/dev/null
  cmake --build --preset cuda --target imp imp_gpu_tests imp_kernel_bench
fi
