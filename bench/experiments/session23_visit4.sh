#!/usr/bin/env bash
# Session 23, visit 4. Nsight Compute (visit 3, bench/results/2026-12-01_ncu_sass_prefill_moe_gate_up_01655ca.txt)
# puts ~21% of the prefill MoE gate/up GEMM's stall samples on register writes right after its cp.async copies
# (LDGSTS): a MOV or LDS that rewrites a register an earlier LDGSTS of the same burst has not read yet waits for it
# (long scoreboard) while all warps, just out of the barrier, queue their copies at once. Three placements of the
# copies (session23_moe_prefill_copies_{late,spread,early}.patch; the same copies, the same stage arithmetic):
#   late:   after the step's four wgmma groups instead of right after the barrier;
#   spread: the activation copies after group 0, the weight copies after group 1;
#   early:  before the barrier, one stage less ahead (the stage refilled at step st is st - 3's, which every warp
#           finished before the barrier of step st - 1), so the copies drain while the warps wait at the barrier.
# Each variant's MoE prefill and golden tests, then pp A/B against head (01655ca), two rounds, medians of 5.
# Build: bench/tools/build_variant.sh bench/experiments/session23_moe_prefill_copies_NAME.patch NAME
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
for v in late spread early; do
  build/exp/imp_gpu_tests_$v --gtest_filter='*MoePrefill*:*Golden*' > "$out/gpu_tests_$v.log" 2>&1
  echo "tests $v rc=$?: $(grep -E '^\[  (PASSED|FAILED)' "$out/gpu_tests_$v.log" | tr '\n' ' ')"
  grep -E "^\[  FAILED" "$out/gpu_tests_$v.log" | head -5
done
VARIANTS="head late spread early" AB_ARGS="--pp 512,4096,16384 --tg 1 --context 1 --runs 5" TL_VARIANTS= bash bench/tools/variants_visit.sh
