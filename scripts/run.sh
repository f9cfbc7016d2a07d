#!/usr/bin/env bash
# Set-up command 1: installs what is missing, builds the CPU engine and generates 32 tokens with the
# bundled default model (a tiny random qwen4_exp fixture checked against Hugging Face transformers).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
cmake --preset cpu >/dev/null
cmake --build --preset cpu --target imp
model=tests/fixtures/golden/ple_qsa
build/cpu/bin/imp inspect --model "$model"
build/cpu/bin/imp generate --model "$model" --backend cpu --prompt-tokens 7,1,42,99,5,1,1,23,88,150,3 \
  --max-tokens 32 --ignore-eos "$@"
