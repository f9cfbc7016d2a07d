#!/usr/bin/env bash
# Session 21, visit 6: l1 = session21_carveout_max_l1.patch (kernels without dynamic shared memory, the GEMVs among
# them, ask for the largest L1) against head (eb1dd79's kernels).
# Carry build/carry.tar.xz (build/exp/imp_{head,l1}, build/cuda/bin/lib).
set -uo pipefail
VARIANTS="head l1" AB_ARGS="--pp 1 --tg 128 --context 1024,32768 --runs 5" TL_VARIANTS= bash bench/tools/variants_visit.sh
