#!/usr/bin/env bash
# Prepared in session 21 (not run: no device time left). The QSA decode selection at 32K context takes 12.1 us of
# each attention layer's critical path (2026-12-01_decode_timeline_32k_eb1dd79.txt); its radix passes load one key
# per loop iteration from L2 and wait on it before the next (PTX: one ld.global per iteration, then the compare
# and the atomic), ~32 round trips per thread at 8192 blocks, and its two walks eight more.
#   qreg = session22_qsa_select_keys_in_registers.patch: each thread holds its contiguous run of up to 8 keys in
#          registers, loaded once with every load in flight (48 registers, no stack); longer contexts keep the L2
#          path. With a test at 32768 / 32800 tokens (both paths). Session 21's staging of the keys in 32 KB of
#          shared memory was slower (-0.7%), perhaps the block's placement (a split change), which registers avoid.
#   qpre = session22_qsa_score_keys_before_wait.patch (applied as 10f7b02 and then deleted): the score kernel (5.8 us on the critical path at 32K) loads
#          the position and its first batch of block keys before its PDL wait (final at launch: the prep kernel
#          before it triggers after its own wait), the query and the newest key (prep may write it) after.
#   qboth = both patches (tests and memcheck run on this one).
# Build here first:
#   bench/tools/build_variant.sh - head
#   bench/tools/build_variant.sh bench/experiments/session22_qsa_select_keys_in_registers.patch qreg
#   bench/tools/build_variant.sh bench/experiments/session22_qsa_score_keys_before_wait.patch qpre
#   bench/tools/build_variant.sh bench/experiments/session22_qsa_select_keys_in_registers.patch+bench/experiments/session22_qsa_score_keys_before_wait.patch qboth
# Carry build/carry.tar.xz (build/exp/imp_{head,qreg,qpre,qboth}, build/exp/imp_gpu_tests_qboth, build/cuda/bin/lib).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
build/exp/imp_gpu_tests_qboth --gtest_filter='*Qsa*:*Attention*:*Golden*' > "$out/gpu_tests_qboth.log" 2>&1
echo "tests qboth rc=$?: $(grep -E '^\[  (PASSED|FAILED)' "$out/gpu_tests_qboth.log" | tr '\n' ' ')"
grep -E "FAILED|golden-cuda" "$out/gpu_tests_qboth.log" | head -20
timeout 150 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_qboth \
  --gtest_filter='GpuQsa.SelectionMatchesCpuAtReleasedShapes:GpuQsa.SelectionMatchesCpuWithManyTies:GpuQsa.RowsSelectionMatchesCpuAtRatioEight:*Golden*/long_sparse:*Golden*/ple_qsa' \
  > "$out/memcheck_qboth.log" 2>&1
echo "memcheck qboth rc=$?: $(grep -E 'ERROR SUMMARY|^\[  (PASSED|FAILED)' "$out/memcheck_qboth.log" | tr '\n' ' ')"
VARIANTS="head qreg qpre qboth" AB_ARGS="--pp 1 --tg 128 --context 1024,32768 --runs 5" TL_VARIANTS= bash bench/tools/variants_visit.sh
