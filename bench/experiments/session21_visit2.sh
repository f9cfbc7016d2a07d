#!/usr/bin/env bash
# Session 21, visit 2: is the decode MoE's gate/up (and down) tail the blocks' spread over the SMs?
#   head  = the tree;
#   g3    = session21_gate_up_three_per_sm.patch: gate/up blocks ask for 60 KB of shared memory, so at most 3 fit
#           on an SM (400 working blocks: 396 in the first wave, 4 later) instead of 4 on the SMs the previous
#           kernel does not hold;
#   g3i   = session21_gate_up_three_per_sm_396_timing_only.patch: g3 with the last 4 strips dropped (wrong results;
#           a timing probe of a perfect 3-per-SM spread);
#   dn132 = session21_down_132_blocks_timing_only.patch: down on 132 blocks instead of 160 (wrong results; a timing
#           probe of down without its 28 SMs of two blocks).
# Build here first:
#   bench/tools/build_variant.sh - head
#   bench/tools/build_variant.sh bench/experiments/session21_gate_up_three_per_sm.patch g3
#   bench/tools/build_variant.sh bench/experiments/session21_gate_up_three_per_sm_396_timing_only.patch g3i
#   bench/tools/build_variant.sh bench/experiments/session21_down_132_blocks_timing_only.patch dn132
#   build/probes/moe_phase and moe_phase_g3: moe_phase_probe.cu on the tree and with the g3 patch applied.
# Carry build/carry.tar.xz (build/exp/imp_{head,g3,g3i,dn132}, build/exp/imp_gpu_tests_g3, build/cuda/bin/lib,
# build/probes/{moe_phase,moe_phase_g3}).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
for p in moe_phase moe_phase_g3; do
  build/probes/$p > "$out/$p.txt" 2>&1; echo "== $p"; cat "$out/$p.txt"
  build/probes/$p gate_up > "$out/${p}_gate_up.txt" 2>&1
done
build/exp/imp_gpu_tests_g3 --gtest_filter='*Moe*:*Golden*:*Router*' > "$out/gpu_tests_g3.log" 2>&1
echo "tests g3 rc=$?: $(grep -E '^\[  (PASSED|FAILED)' "$out/gpu_tests_g3.log" | tr '\n' ' ')"
VARIANTS="head g3 g3i dn132" AB_ARGS="--pp 1 --tg 128 --context 1024,32768 --runs 5" TL_VARIANTS= \
  bash bench/tools/variants_visit.sh
