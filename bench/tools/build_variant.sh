#!/usr/bin/env bash
# Builds imp and imp_gpu_tests with a patch applied and keeps them as build/exp/imp_NAME and
# build/exp/imp_gpu_tests_NAME (for bench/tools/variants_visit.sh and the variant's GPU tests), then takes the
# patch back out (the next ninja rebuilds the tree as committed). Usage:
#   bench/tools/build_variant.sh bench/experiments/moe_prefill_producer_warpgroup.patch producer
#   bench/tools/build_variant.sh - main        # the tree as it is
#   bench/tools/build_variant.sh a.patch+b.patch both   # several patches, applied in order
set -euo pipefail
patch=$1 name=$2
cd "$(dirname "$0")/../.."
mkdir -p build/exp
if [ "$patch" != - ]; then
  IFS=+ read -ra patches <<< "$patch"
  applied=()
  undo() { for ((i = ${#applied[@]} - 1; i >= 0; i--)); do git apply -R "${applied[i]}"; done; }
  trap undo EXIT
  for p in "${patches[@]}"; do git apply "$p"; applied+=("$p"); done
fi
ninja -C build/cuda imp imp_gpu_tests > /dev/null
cp build/cuda/bin/imp "build/exp/imp_$name"
cp build/cuda/tests/imp_gpu_tests "build/exp/imp_gpu_tests_$name"
label=$(git rev-parse --short HEAD); [ "$patch" != - ] && label="$label + $patch"
echo "$label" > "build/exp/imp_$name.label"  # variants_visit.sh records it as the run's commit
echo "build/exp/imp_$name, build/exp/imp_gpu_tests_$name: $label"
