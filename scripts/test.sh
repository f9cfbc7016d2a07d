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
