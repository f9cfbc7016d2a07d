#!/usr/bin/env bash
# Set-up command 2: installs what is missing, builds everything and runs every test that needs no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
cmake --preset cpu >/dev/null
cmake --build --preset cpu
ctest --preset cpu
